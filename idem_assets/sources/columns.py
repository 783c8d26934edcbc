"""A declared column: its type (parsed once), how files spell it, and its value rules.

``Column.type`` is a ``ColumnType`` from the moment the declaration loads, and the column's
rules are compiled against it then (``Column.value_rules``): nothing downstream parses a
type or a bound again.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from idem_assets.lake.predicates import is_identifier
from idem_assets.landing.column_types import TYPE_CHOICES, ColumnType, parse_type
from idem_assets.landing.contract import ContractColumn
from idem_assets.landing.rules import ValueRule
from idem_assets.sources.rules import Rule

# strftime directives a column format may use: those Python's datetime and polars (chrono)
# read alike.
_FORMAT_DIRECTIVES = set("YymdHIMSpbBjz")
_SAMPLE_TIME = dt.datetime(2024, 1, 31, 22, 5, 7)


def _column_type(value: Any) -> ColumnType:
    if isinstance(value, ColumnType):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a column type; allowed: {TYPE_CHOICES}")
    return parse_type(value)


# A type as declared: text in YAML, a ColumnType once loaded (written back as its text).
DeclaredType = Annotated[
    ColumnType,
    PlainValidator(_column_type),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "description": f"One of {TYPE_CHOICES}."}),
]


class Declared(BaseModel):
    """A part of a declaration: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Column(Declared):
    """A column of the source's files and of its lake table."""

    name: str = Field(description="The column's name in the lake table.")
    type: DeclaredType = Field(description=f"One of {TYPE_CHOICES}.")
    nullable: bool = Field(default=True, description="false: a null value quarantines its row.")
    from_: str | None = Field(
        default=None,
        alias="from",
        description="The name the files give the column, when it differs (a rename).",
    )
    epoch: Literal["seconds", "milliseconds"] | None = Field(
        default=None, description="Timestamps only: values are epoch seconds or milliseconds."
    )
    date_of: str | None = Field(
        default=None,
        description="Derived, not read from files: the UTC date of this "
        "timestamp column (e.g. a Delta partition column).",
    )
    folder_day: bool = Field(
        default=False,
        description="Date columns of daily sources: the day of the file's folder, not read "
        "from the files (it may be the partition_date).",
    )
    format: str | None = Field(
        default=None,
        description="Date and timestamp text in this strftime format ('%d.%m.%Y', "
        "'%m/%d/%Y %I:%M %p'); without it ISO text is read.",
    )
    null_values: tuple[str, ...] | None = Field(
        default=None,
        description="Text values that mean null in this column (replaces the source's "
        "null_values; [] keeps every spelling as text).",
    )
    description: str | None = Field(default=None, description="Shown in the Dagster UI.")
    rules: tuple[Rule, ...] = Field(default=(), description="Value rules on the column.")
    _value_rules: tuple[ValueRule, ...] = PrivateAttr(default=())

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_identifier(value):
            raise ValueError(
                f"{value!r} is not a plain column name (letters, digits and _, "
                "not starting with a digit)"
            )
        return value

    @field_validator("null_values")
    @classmethod
    def _spellings(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for spelling in value or ():
            if not spelling.strip():
                raise ValueError(
                    f"{spelling!r} is blank; blank is already null for non-string columns"
                )
        return value

    @property
    def derived(self) -> bool:
        """Whether the column is computed rather than read from files."""
        return self.date_of is not None

    @property
    def value_rules(self) -> tuple[ValueRule, ...]:
        """The column's rules, compiled against its type when the declaration loaded."""
        return self._value_rules

    def contract_column(self, source_null_values: tuple[str, ...]) -> ContractColumn:
        """How the reader reads this column (a read column; the source's null spellings)."""
        return ContractColumn(
            name=self.name,
            type=self.type,
            nullable=self.nullable,
            file_name=self.from_,
            epoch=self.epoch,
            format=self.format,
            null_values=()
            if self.folder_day
            else (source_null_values if self.null_values is None else self.null_values),
            folder_day=self.folder_day,
        )

    @model_validator(mode="after")
    def _consistent(self) -> Column:
        kind = self.type
        if self.epoch is not None and kind.kind != "timestamp":
            raise ValueError(f"{self.name}: epoch applies to timestamp columns, not {kind}")
        if self.folder_day:
            if kind.kind != "date":
                raise ValueError(f"{self.name}: a folder_day column has type date, not {kind}")
            if self.from_ is not None or self.epoch is not None or self.derived:
                raise ValueError(
                    f"{self.name}: a folder_day column is not read from files, so it takes "
                    "no from, epoch or date_of"
                )
        if self.derived:
            if kind.kind != "date":
                raise ValueError(f"{self.name}: a date_of column has type date, not {kind}")
            if self.from_ is not None or self.epoch is not None:
                raise ValueError(
                    f"{self.name}: a derived (date_of) column is not read from "
                    "files, so it takes no from or epoch"
                )
            if any(rule.severity == "quarantine" for rule in self.rules):
                raise ValueError(
                    f"{self.name}: a derived column's rules cannot quarantine "
                    "(they are checked on the table rows); use warn or error"
                )
        if self.format is not None:
            if not kind.is_temporal:
                raise ValueError(
                    f"{self.name}: format applies to date and timestamp columns, not {kind}"
                )
            if self.epoch is not None or self.folder_day or self.derived:
                raise ValueError(
                    f"{self.name}: format reads text, so it does not go with epoch, "
                    "folder_day or date_of"
                )
            problem = format_problem(self.format, timestamp=kind.kind == "timestamp")
            if problem:
                raise ValueError(f"{self.name}: {problem}")
        # Compiled here, once: a bound or value that does not fit the type is refused now.
        self._value_rules = tuple(rule.compile(self.name, kind) for rule in self.rules)
        return self


def format_problem(fmt: str, *, timestamp: bool) -> str | None:
    """Why a date or timestamp format cannot be used, or None.

    It may use only directives Python's datetime and polars read alike; it must name the
    year, month and day (a timestamp also the hour, %I with %p), and strftime must parse
    back what it writes.
    """
    directives = re.findall(r"%(.)", fmt)
    unknown = sorted({d for d in directives if d not in _FORMAT_DIRECTIVES})
    if not directives or unknown or fmt.count("%") != len(directives):
        shown = ", ".join(f"%{d}" for d in unknown) or "none"
        return (
            f"format {fmt!r} is not a strftime format this reader supports (unknown "
            f"directive(s): {shown}); use %Y %y %m %d %H %I %M %S %p %b %B %j %z"
        )
    used = set(directives)
    needed = [
        ("the year (%Y or %y)", bool(used & set("Yy"))),
        ("the month (%m, %b or %B)", bool(used & set("mbBj"))),
        ("the day (%d)", bool(used & set("dj"))),
    ]
    if timestamp:
        needed.append(("the hour (%H, or %I with %p)", "H" in used or {"I", "p"} <= used))
    missing = [what for what, present in needed if not present]
    if missing:
        return f"format {fmt!r} does not name {', '.join(missing)}"
    sample = _SAMPLE_TIME.replace(tzinfo=dt.UTC) if "z" in used else _SAMPLE_TIME
    try:
        parsed = dt.datetime.strptime(sample.strftime(fmt), fmt)
    except ValueError as exc:
        return f"format {fmt!r}: strftime cannot parse back what it writes ({exc})"
    fields = ["year", "month", "day"]
    if timestamp:
        fields += ["hour"] + [f for f, d in (("minute", "M"), ("second", "S")) if d in used]
    if any(getattr(parsed, f) != getattr(sample, f) for f in fields):
        return (
            f"format {fmt!r}: {sample:%Y-%m-%d %H:%M:%S} written as "
            f"{sample.strftime(fmt)!r} reads back as {parsed}"
        )
    return None
