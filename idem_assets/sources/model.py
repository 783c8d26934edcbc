"""A landing source and its lake table, declared in one place (YAML or Python).

``LandingSource`` is what a user writes; ``contract()`` compiles it into the reader's
``SourceContract``. Every field is checked when the declaration is loaded, and a bad one
is named together with what is allowed (see docs/landing.md, "Declaring a source").
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import zoneinfo
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from idem_assets.lake.predicates import is_identifier
from idem_assets.landing.contract import ENCODINGS, FORMATS, SourceContract
from idem_assets.landing.layout import DEFAULT_DAILY_LAYOUT, DEFAULT_SNAPSHOT_LAYOUT, Layout
from idem_assets.landing.numbers import DECIMAL_SEPARATORS, THOUSANDS_SEPARATORS, Separators
from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.landing.rules import ValueRule, pattern_problem

# A source's name: it names a landing folder, a lake table, an asset and (for a stream) a
# checkpoint scope and Delta txn app id. idem_assets.stream.source imports it from here.
SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_DECIMAL = re.compile(r"^(?:decimal|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
TYPES: dict[str, pa.DataType] = {
    "int64": pa.int64(),
    "bigint": pa.int64(),
    "int32": pa.int32(),
    "integer": pa.int32(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
TYPE_CHOICES = "int64, int32, float64, bool, string, date, timestamp, decimal(P,S)"
_DELIMITER_NAMES = {"tab": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")
_RESERVED_SUFFIXES = (".parquet", ".jsonl", ".gz")
# strftime directives a column format may use: those Python's datetime and polars (chrono)
# read alike.
_FORMAT_DIRECTIVES = set("YymdHIMSpbBjz")
_SAMPLE_TIME = dt.datetime(2024, 1, 31, 22, 5, 7)
MAX_DECLARED_FIELD_BYTES = 64 << 20
_KINDS = {
    "timestamp": pa.types.is_timestamp,
    "date": pa.types.is_date32,
    "integer": pa.types.is_integer,
    "decimal": pa.types.is_decimal,
}


def parse_type(text: str) -> pa.DataType:
    """The Arrow type of a declared column type (``decimal(15,2)``, ``timestamp``...)."""
    spelled = text.strip().lower()
    if spelled in TYPES:
        return TYPES[spelled]
    match = _DECIMAL.match(spelled)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise ValueError(f"decimal({precision},{scale}) needs 1 <= P <= 38 and S <= P")
        return pa.decimal128(precision, scale)
    raise ValueError(f"{text!r} is not a column type; allowed: {TYPE_CHOICES}")


class _Declared(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Rule(_Declared):
    """One value rule: exactly one of allowed, pattern, non_negative, or min and/or max."""

    allowed: tuple[str | int, ...] | None = Field(
        default=None, description="The values the column may hold (exact, case-sensitive)."
    )
    min: str | int | float | None = Field(
        default=None, description="Smallest allowed value (inclusive), in the column's type."
    )
    max: str | int | float | None = Field(
        default=None, description="Largest allowed value (inclusive), in the column's type."
    )
    non_negative: bool = Field(default=False, description="The value is >= 0.")
    pattern: str | None = Field(
        default=None, description="A regular expression the whole value must match."
    )
    severity: Literal["warn", "error", "quarantine"] = Field(
        default="warn",
        description="warn: an asset check warns with counts and samples; error: the check "
        "fails (blocking downstream where checks block); quarantine: breaking rows are kept "
        "out of the table, with the rule as their reason.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Rule:
        kinds = [
            name
            for name, set_ in (
                ("allowed", self.allowed is not None),
                ("pattern", self.pattern is not None),
                ("non_negative", self.non_negative),
                ("min/max", self.min is not None or self.max is not None),
            )
            if set_
        ]
        if len(kinds) != 1:
            raise ValueError(
                "a rule sets exactly one of allowed, pattern, non_negative, or "
                f"min and/or max (this one sets {', '.join(kinds) or 'none'})"
            )
        if self.pattern is not None:
            problem = pattern_problem(self.pattern)
            if problem:
                raise ValueError(problem)
        return self


class Column(_Declared):
    """A column of the source's files and of its lake table."""

    name: str = Field(description="The column's name in the lake table.")
    type: str = Field(description=f"One of {TYPE_CHOICES}.")
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

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_identifier(value):
            raise ValueError(
                f"{value!r} is not a plain column name (letters, digits and _, "
                "not starting with a digit)"
            )
        return value

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        parse_type(value)
        return value

    @property
    def arrow_type(self) -> pa.DataType:
        """The column's Arrow type."""
        return parse_type(self.type)

    @property
    def derived(self) -> bool:
        """Whether the column is computed rather than read from files."""
        return self.date_of is not None

    @model_validator(mode="after")
    def _consistent(self) -> Column:
        kind = self.arrow_type
        if self.epoch is not None and not pa.types.is_timestamp(kind):
            raise ValueError(f"{self.name}: epoch applies to timestamp columns, not {self.type}")
        if self.folder_day:
            if not pa.types.is_date32(kind):
                raise ValueError(f"{self.name}: a folder_day column has type date, not {self.type}")
            if self.from_ is not None or self.epoch is not None or self.date_of is not None:
                raise ValueError(
                    f"{self.name}: a folder_day column is not read from files, so it takes "
                    "no from, epoch or date_of"
                )
        if self.format is not None:
            if not (pa.types.is_date32(kind) or pa.types.is_timestamp(kind)):
                raise ValueError(
                    f"{self.name}: format applies to date and timestamp columns, not {self.type}"
                )
            if self.epoch is not None or self.folder_day or self.date_of is not None:
                raise ValueError(
                    f"{self.name}: format reads text, so it does not go with epoch, "
                    "folder_day or date_of"
                )
            problem = format_problem(self.format, timestamp=pa.types.is_timestamp(kind))
            if problem:
                raise ValueError(f"{self.name}: {problem}")
        for spelling in self.null_values or ():
            if not spelling.strip():
                raise ValueError(
                    f"{self.name}: null_values: {spelling!r} is blank; blank is already null "
                    "for non-string columns"
                )
        if self.date_of is not None:
            if not pa.types.is_date32(kind):
                raise ValueError(f"{self.name}: a date_of column has type date, not {self.type}")
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
        for rule in self.rules:
            _compile_rule(self, rule)  # bounds and values must fit the column's type
        return self


class CsvOptions(_Declared):
    """How the source's CSV files are written."""

    delimiter: str = Field(
        default=",", description="Field delimiter: one character, or tab, comma, semicolon, pipe."
    )
    header: bool = Field(
        default=True,
        description="false: files have no header line; their fields are the columns in "
        "declared order (no from: then).",
    )
    trailing_delimiter: bool = Field(
        default=False,
        description="true: every line ends with the delimiter (TPC-H's .tbl); that empty last "
        "field is not a column, and a line without it is a ragged row.",
    )
    suffixes: tuple[str, ...] = Field(
        default=(),
        description="More file suffixes read as this source's CSV, e.g. [.tbl, .dat, .txt] "
        "(and the same plus .gz).",
    )

    @field_validator("suffixes")
    @classmethod
    def _suffixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for suffix in value:
            if not _SUFFIX.match(suffix) or suffix.lower() in _RESERVED_SUFFIXES:
                raise ValueError(
                    f"suffix {suffix!r} must be a dot and letters or digits (like .tbl), and "
                    "not one of .parquet, .jsonl, .gz"
                )
        return tuple(s.lower() for s in value)

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, value: str) -> str:
        value = _DELIMITER_NAMES.get(value, value)
        if len(value) != 1 or value in '"\r\n':
            raise ValueError(
                f"delimiter {value!r} must be one character other than a quote "
                "or a line break (or one of: tab, comma, semicolon, pipe)"
            )
        return value


class NumberOptions(_Declared):
    """How number text is spelled in the source's files (every format)."""

    decimal: str = Field(default=".", description=f"Decimal separator: {DECIMAL_SEPARATORS}.")
    thousands: str | None = Field(
        default=None, description=f"Thousands separator, if any: {THOUSANDS_SEPARATORS}."
    )

    @model_validator(mode="after")
    def _separators(self) -> NumberOptions:
        Separators(self.decimal, self.thousands)
        return self


class CheckOptions(_Declared):
    """The asset checks every declared source gets."""

    blocking: bool = Field(
        default=False, description="A failing ERROR check blocks downstream assets."
    )
    quarantine_share: float = Field(
        default=0.01,
        gt=0,
        le=1,
        description="The quarantine_share check warns when more than this share of a day's "
        "raw rows is quarantined (it fails when a non-empty day loads nothing).",
    )


class SensorOptions(_Declared):
    """The landing sensor every declared source gets."""

    also_request: tuple[str, ...] = Field(
        default=(),
        description="Downstream assets (same partitions) to materialize in the same run.",
    )
    minimum_interval_seconds: int = Field(default=30, ge=5, description="Tick interval.")


Strategy = Literal["overwrite", "merge", "replace"]


class LandingSource(_Declared):
    """A landing source and the lake table built from it (see docs/landing.md)."""

    name: str = Field(
        description="Source name: the {source} of the layout, and by default "
        "the asset and table name."
    )
    asset: str | None = Field(default=None, description="Asset and table name (default: name).")
    description: str | None = Field(default=None, description="Shown in the Dagster UI.")
    snapshot: bool = Field(
        default=False,
        description="Full snapshots instead of daily files: the newest file "
        "(greatest name) of the snapshot folder is the whole table.",
    )
    layout: str | None = Field(
        default=None,
        description=f"Folder template: '{DEFAULT_DAILY_LAYOUT}' (default), "
        "'{source}/{yyyy}/{mm}/{dd}', '{source}/dt={date}'...; snapshots: "
        f"'{DEFAULT_SNAPSHOT_LAYOUT}'.",
    )
    formats: tuple[Literal["parquet", "csv", "jsonl"], ...] = Field(
        default=FORMATS, description="File formats read (.csv.gz and .jsonl.gz included)."
    )
    columns: tuple[Column, ...] = Field(min_length=1, description="The source's columns.")
    natural_key: tuple[str, ...] = Field(min_length=1, description="Columns identifying a row.")
    version: str | None = Field(
        default=None, description="Column whose newest value wins when a key repeats."
    )
    partition_date: str | None = Field(
        default=None, description="Date column that must equal the day of the file's folder."
    )
    strategy: Strategy | None = Field(
        default=None,
        description="overwrite (replace the run's days; default when "
        "partition_date is set), merge (MERGE on the natural key; default otherwise), "
        "replace (snapshots: atomic full replace).",
    )
    partition_column: str | None = Field(
        default=None, description="Delta partition column (default: partition_date for overwrite)."
    )
    prune_columns: tuple[str, ...] = Field(
        default=(),
        description="Merge only: columns whose [min, max] prunes the "
        "MERGE to the files it can touch.",
    )
    z_order: tuple[str, ...] = Field(
        default=(),
        description="Columns the maintenance job Z-orders the table's files by (queries "
        "filtering on them skip more files); none: plain compaction.",
    )
    first_day: dt.date | None = Field(
        default=None, description="First partition day (daily sources, required)."
    )
    timezone: str = Field(
        default="UTC", description="IANA zone of timestamps written without an offset."
    )
    csv: CsvOptions = Field(default_factory=CsvOptions)
    encoding: Literal["utf-8", "utf-8-sig", "utf-16", "cp1252", "latin-1"] = Field(
        default="utf-8",
        description=f"Text encoding of CSV and JSON Lines files: {', '.join(ENCODINGS)}. "
        "Signatures hash the bytes as delivered.",
    )
    null_values: tuple[str, ...] = Field(
        default=(),
        description="Text values that mean null in CSV and JSON Lines text, in every column "
        "(string columns too), e.g. [NA, 'NULL', '\\N']; a column's own null_values "
        "replaces this list.",
    )
    numbers: NumberOptions = Field(default_factory=NumberOptions)
    checks: CheckOptions = Field(default_factory=CheckOptions)
    sensor: SensorOptions = Field(default_factory=SensorOptions)
    max_field_bytes: int = Field(
        default=MAX_FIELD_BYTES,
        gt=0,
        le=MAX_DECLARED_FIELD_BYTES,
        description="A text value longer than this quarantines its row.",
    )
    code_version: str = Field(
        default="1",
        description="Bump when the declaration's meaning changes: reruns skip "
        "only on unchanged files and code.",
    )
    group: str = Field(default="lake", description="Dagster asset group.")
    owners: tuple[str, ...] = Field(default=(), description="Dagster asset owners.")

    @field_validator("name", "asset")
    @classmethod
    def _names(cls, value: str | None) -> str | None:
        if value is not None and not SOURCE_NAME.match(value):
            raise ValueError(
                f"{value!r} must be lower case letters, digits and _, starting "
                "with a letter (it names a folder, a table and an asset)"
            )
        return value

    @field_validator("null_values")
    @classmethod
    def _spellings(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spelling in value:
            if not spelling.strip():
                raise ValueError(
                    f"{spelling!r} is blank; blank text is already null for non-string columns"
                )
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"{value!r} is not an IANA time zone such as UTC or Europe/Berlin"
            ) from exc
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LandingSource:
        _check_source(self)
        return self

    @property
    def table(self) -> str:
        """The asset and Delta table name."""
        return self.asset or self.name

    @property
    def read_columns(self) -> list[Column]:
        """Columns read from files (not derived)."""
        return [c for c in self.columns if not c.derived]

    @property
    def resolved_strategy(self) -> Strategy:
        """The write strategy, defaults applied."""
        if self.strategy:
            return self.strategy
        if self.snapshot:
            return "replace"
        return "overwrite" if self.partition_date else "merge"

    @property
    def resolved_partition_column(self) -> str | None:
        """The Delta partition column, defaults applied."""
        if self.partition_column:
            return self.partition_column
        return self.partition_date if self.resolved_strategy == "overwrite" else None

    def table_schema(self) -> pa.Schema:
        """The lake table's schema: read columns, then derived ones, in declaration order."""
        key = set(self.natural_key)
        return pa.schema(
            [pa.field(c.name, c.arrow_type, nullable=c.name not in key) for c in self.columns]
        )

    def contract(self) -> SourceContract:
        """The reader's contract for this source."""
        key = set(self.natural_key)
        schema = pa.schema(
            [
                pa.field(c.name, c.arrow_type, nullable=c.nullable and c.name not in key)
                for c in self.read_columns
            ]
        )
        return SourceContract(
            name=self.name,
            schema=schema,
            natural_key=tuple(self.natural_key),
            version_column=self.version,
            date_column=self.partition_date,
            daily=not self.snapshot,
            layout_template=self.layout,
            formats=tuple(f for f in FORMATS if f in self.formats),
            file_columns={c.name: c.from_ for c in self.read_columns if c.from_},
            timezone=self.timezone,
            epoch_columns={c.name: c.epoch for c in self.read_columns if c.epoch},
            decimal_separator=self.numbers.decimal,
            thousands_separator=self.numbers.thousands,
            csv_delimiter=self.csv.delimiter,
            csv_header=self.csv.header,
            csv_trailing_delimiter=self.csv.trailing_delimiter,
            csv_suffixes=self.csv.suffixes,
            encoding=self.encoding,
            null_values={
                c.name: spellings
                for c in self.read_columns
                if not c.folder_day
                and (spellings := self.null_values if c.null_values is None else c.null_values)
            },
            folder_day_columns=tuple(c.name for c in self.read_columns if c.folder_day),
            time_formats={c.name: c.format for c in self.read_columns if c.format},
            rules=tuple(_compile_rule(c, r) for c in self.read_columns for r in c.rules),
            first_day=self.first_day,
            max_field_bytes=self.max_field_bytes,
        )

    def derived_rules(self) -> tuple[ValueRule, ...]:
        """Rules on derived columns (checked on table rows, never quarantined)."""
        return tuple(_compile_rule(c, r) for c in self.columns if c.derived for r in c.rules)


def _check_source(source: LandingSource) -> None:
    names = [c.name for c in source.columns]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"columns: {', '.join(doubled)} declared more than once")
    files = [c.from_ or c.name for c in source.read_columns]
    doubled = sorted({n for n in files if files.count(n) > 1})
    if doubled:
        raise ValueError(f"columns: file column(s) {', '.join(doubled)} read more than once")
    by_name = {c.name: c for c in source.columns}

    def need(
        field: str, column: str | None, *, read: bool = False, kinds: tuple[str, ...] = ()
    ) -> None:
        if column is None:
            return
        if column not in by_name:
            raise ValueError(
                f"{field}: {column!r} is not a declared column (declared: {', '.join(names)})"
            )
        found = by_name[column]
        if read and found.derived:
            raise ValueError(f"{field}: {column!r} is derived; it must be read from files")
        if kinds and not any(_KINDS[k](found.arrow_type) for k in kinds):
            raise ValueError(
                f"{field}: {column!r} has type {found.type}; it must be a "
                f"{' or '.join(kinds)} column"
            )

    for key in source.natural_key:
        need("natural_key", key, read=True)
    need("version", source.version, read=True, kinds=("timestamp", "date", "integer", "decimal"))
    need("partition_date", source.partition_date, read=True, kinds=("date",))
    need("partition_column", source.partition_column, kinds=("date",))
    for column in source.prune_columns:
        need("prune_columns", column)
    for column in source.z_order:
        need("z_order", column)
    for column in source.columns:
        if column.date_of is not None:
            need(f"{column.name}: date_of", column.date_of, read=True, kinds=("timestamp",))
    folder_days = [c.name for c in source.columns if c.folder_day]
    if folder_days and source.snapshot:
        raise ValueError(
            f"columns: {', '.join(folder_days)}: folder_day is the day of a daily source's "
            "folder; a snapshot source has none"
        )
    if not source.csv.header:
        renamed = [c.name for c in source.read_columns if c.from_]
        if renamed:
            raise ValueError(
                f"columns: {', '.join(renamed)}: from: names a header field, but csv.header is "
                "false (columns are read in declared order: rename the column instead)"
            )
    if source.csv.suffixes and "csv" not in source.formats:
        raise ValueError("csv.suffixes: the source's formats do not include csv")
    strategy = source.resolved_strategy
    layout = source.layout or (DEFAULT_SNAPSHOT_LAYOUT if source.snapshot else DEFAULT_DAILY_LAYOUT)
    daily_layout = Layout(layout, source.name).daily
    if source.snapshot:
        if daily_layout:
            raise ValueError(
                f"layout {layout!r} names a day, but a snapshot source has one "
                "folder; drop the day placeholders"
            )
        for field in ("first_day", "partition_date", "partition_column"):
            if getattr(source, field) is not None:
                raise ValueError(f"{field}: a snapshot source has no partitions; remove it")
        if strategy == "overwrite":
            raise ValueError(
                "strategy: a snapshot source is written by replace or merge, not overwrite"
            )
    else:
        if not daily_layout:
            raise ValueError(
                f"layout {layout!r} names no day: add {{date}} (or "
                "{yyyy}/{mm}/{dd}), or set snapshot: true"
            )
        if source.first_day is None:
            raise ValueError("first_day: a daily source needs its first partition day (YYYY-MM-DD)")
        if strategy == "replace":
            raise ValueError(
                "strategy: replace is for snapshot sources; a daily source is "
                "written by overwrite or merge"
            )
    if strategy == "overwrite":
        if source.partition_date is None:
            raise ValueError(
                "strategy overwrite replaces the run's days, so it needs "
                "partition_date (the column holding each row's day)"
            )
        if source.resolved_partition_column != source.partition_date:
            raise ValueError(
                "partition_column: an overwrite table is partitioned by its "
                f"partition_date {source.partition_date!r}"
            )
    if source.prune_columns and strategy != "merge":
        raise ValueError("prune_columns applies to the merge strategy only")


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


def _typed_bound(column: Column, value: Any, what: str) -> Any:
    kind = column.arrow_type
    try:
        if pa.types.is_integer(kind):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if pa.types.is_decimal(kind):
            return decimal.Decimal(str(value))
        if pa.types.is_floating(kind):
            return float(value)
        if pa.types.is_date32(kind):
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
        if pa.types.is_timestamp(kind):
            stamp = (
                value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
            )
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    except (ValueError, TypeError, decimal.InvalidOperation) as exc:
        raise ValueError(f"{column.name}: {what} {value!r} is not a {column.type} value") from exc
    raise ValueError(
        f"{column.name}: {what} applies to numbers, dates and timestamps, not {column.type}"
    )


def _compile_rule(column: Column, rule: Rule) -> ValueRule:
    kind = column.arrow_type
    if rule.allowed is not None:
        if pa.types.is_string(kind):
            values: tuple[Any, ...] = tuple(str(v) for v in rule.allowed)
        elif pa.types.is_integer(kind):
            values = tuple(_typed_bound(column, v, "allowed value") for v in rule.allowed)
        else:
            raise ValueError(
                f"{column.name}: allowed applies to string and integer columns, not {column.type}"
            )
        return ValueRule(column.name, "allowed", rule.severity, allowed=values)
    if rule.pattern is not None:
        if not pa.types.is_string(kind):
            raise ValueError(f"{column.name}: pattern applies to string columns, not {column.type}")
        return ValueRule(column.name, "pattern", rule.severity, pattern=rule.pattern)
    if rule.non_negative:
        if not (
            pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        ):
            raise ValueError(
                f"{column.name}: non_negative applies to number columns, not {column.type}"
            )
        return ValueRule(column.name, "non_negative", rule.severity)
    low = None if rule.min is None else _typed_bound(column, rule.min, "min")
    high = None if rule.max is None else _typed_bound(column, rule.max, "max")
    if low is not None and high is not None and low > high:
        raise ValueError(f"{column.name}: min {rule.min!r} is above max {rule.max!r}")
    return ValueRule(column.name, "range", rule.severity, low=low, high=high)
