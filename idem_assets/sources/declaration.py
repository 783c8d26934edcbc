"""A landing source and its lake table, declared in one place (YAML or Python).

A source is daily (``DailySource``: a folder per day, a first partition day, a date column
and partition overwrite or merge) or a snapshot (``SnapshotSource``: one folder whose
newest file is the whole table, replaced or merged). ``LandingSource`` is what both share;
validating a mapping as a ``LandingSource`` gives the one its ``snapshot`` flag names, so
a field that does not belong to the kind is refused as an unknown field. What is left to
check across fields (that named columns exist and have the right type, that the layout
names a day exactly when the source is daily) is checked here when the declaration loads,
and a bad field is named together with what is allowed (docs/landing.md). ``contract()``
compiles a declaration into the reader's ``SourceContract``.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from idem_assets.landing.column_types import ColumnType, TypedColumn, arrow_schema
from idem_assets.landing.contract import ENCODINGS, FORMATS, SourceContract
from idem_assets.landing.layout import DEFAULT_DAILY_LAYOUT, DEFAULT_SNAPSHOT_LAYOUT, Layout
from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.landing.rules import ValueRule
from idem_assets.sources.columns import Column, Declared
from idem_assets.sources.options import (
    BackfillOptions,
    CheckOptions,
    CsvOptions,
    DeleteMarker,
    NumberOptions,
    SensorOptions,
)

if TYPE_CHECKING:
    import pyarrow as pa

# A source's name: it names a landing folder, a lake table, an asset and (for a stream) a
# checkpoint scope and Delta txn app id. idem_assets.stream.source imports it from here.
SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
MAX_DECLARED_FIELD_BYTES = 64 << 20
Strategy = Literal["overwrite", "merge", "replace", "history"]
# What a column named by another field must be, by name of the requirement.
_KINDS: dict[str, Callable[[ColumnType], bool]] = {
    "timestamp": lambda t: t.kind == "timestamp",
    "date": lambda t: t.kind == "date",
    "integer": lambda t: t.is_integer,
    "decimal": lambda t: t.kind == "decimal",
}


class LandingSource(Declared):
    """A landing source and the lake table built from it: a DailySource or a SnapshotSource.

    ``LandingSource.model_validate(mapping)`` (and a component's ``defs.yaml``) gives the
    kind ``snapshot`` names; in Python, construct ``DailySource(...)`` or
    ``SnapshotSource(...)``.

    Example:
        >>> import pathlib
        >>> import tempfile
        >>> import dagster as dg
        >>> from idem_assets import (
        ...     CheckpointResource, LakeResource, LandingSource, default_resources,
        ...     source_definitions,
        ... )
        >>> source = LandingSource.model_validate({
        ...     "name": "payments", "first_day": "2024-03-01",
        ...     "columns": [{"name": "payment_id", "type": "int64"},
        ...                 {"name": "booked_on", "type": "date"},
        ...                 {"name": "amount", "type": "decimal(12,2)"}],
        ...     "natural_key": ["payment_id"], "partition_date": "booked_on",
        ... })
        >>> type(source).__name__
        'DailySource'
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> day = root / "landing" / "payments" / "date=2024-03-01"
        >>> day.mkdir(parents=True)
        >>> _ = (day / "part-0.csv").write_text(
        ...     "payment_id,booked_on,amount\\n1,2024-03-01,9.50\\n2,2024-03-01,oops\\n"
        ... )
        >>> resources = default_resources(
        ...     LakeResource(landing_dir=str(root / "landing"), lake_dir=str(root / "lake")),
        ...     CheckpointResource(url=f"sqlite:///{root}/checkpoint.db"),
        ... )
        >>> defs = dg.Definitions.merge(
        ...     source_definitions(source), dg.Definitions(resources=resources)
        ... )
        >>> job = defs.resolve_implicit_global_asset_job_def()
        >>> done = job.execute_in_process(partition_key="2024-03-01")
        >>> meta = done.asset_materializations_for_node("payments")[0].metadata
        >>> meta["raw_rows"].value, meta["valid_rows"].value, meta["quarantine_reasons"].value
        (2, 1, {'amount': 1})
    """

    # Why a field is required, or belongs to the other kind only: shown for a missing or an
    # unknown field instead of pydantic's words.
    WHY: ClassVar[dict[str, str]] = {}

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
    strategy: Strategy | None = Field(
        default=None,
        description="overwrite (replace the run's days; default when "
        "partition_date is set), merge (MERGE on the natural key; default otherwise), "
        "replace (snapshots: atomic full replace), history (SCD type 2: a row per version, "
        "valid_from/valid_to/is_current from the version column).",
    )
    delete_marker: DeleteMarker | None = Field(
        default=None,
        description="Merge and history: a row marked so deletes its key; ordered by the "
        "version like an update (a delete wins a tie), so an older upsert never brings it "
        "back (a history closes the key's version).",
    )
    change_data_feed: bool = Field(
        default=False,
        description="Keep a Delta change data feed: every write feeds only the rows it "
        "changes (an unchanged rerun feeds nothing), for consumers of the changes since they "
        "last ran (idem_assets.lib.consume_changes).",
    )
    erasable_keys: tuple[str, ...] = Field(
        default=(),
        description="Columns that identify a person (e.g. customer_id): `idem-assets erase "
        "--key customer_id=42` removes the key's rows in one commit and every later write "
        "(rerun, backfill, Spark, stream) leaves them out; erased_keys_absent checks it.",
    )
    prune_columns: tuple[str, ...] = Field(
        default=(),
        description="Merge and history: columns whose [min, max] prunes the "
        "MERGE to the files it can touch.",
    )
    z_order: tuple[str, ...] = Field(
        default=(),
        description="Columns the maintenance job Z-orders the table's files by (queries "
        "filtering on them skip more files); none: plain compaction.",
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

    def __init__(self, **data: Any) -> None:
        if type(self) is LandingSource:
            raise TypeError(
                "declare a DailySource(...) or a SnapshotSource(...); "
                "LandingSource.model_validate(mapping) chooses one by its snapshot flag"
            )
        super().__init__(**data)

    @model_validator(mode="wrap")
    @classmethod
    def _of_its_kind(cls, data: Any, handler: Any) -> Any:
        """Validated as a LandingSource, a mapping becomes the kind its snapshot flag names."""
        if cls is LandingSource and isinstance(data, dict):
            return kind_of(data).model_validate(data)
        return handler(data)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The JSON schema of a declaration (a ``defs.yaml``'s attributes): either kind."""
        if cls is not LandingSource:
            return super().model_json_schema(*args, **kwargs)
        return TypeAdapter(DailySource | SnapshotSource).json_schema(*args, **kwargs)

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
    def _columns_named_exist(self) -> LandingSource:
        names = [c.name for c in self.columns]
        _refuse_doubles("columns", "{} declared more than once", names)
        _refuse_doubles(
            "columns",
            "file column(s) {} read more than once",
            [c.from_ or c.name for c in self.read_columns],
        )
        for key in self.natural_key:
            self.require("natural_key", key, read=True)
        self.require("version", self.version, "timestamp", "date", "integer", "decimal", read=True)
        for column in self.prune_columns:
            self.require("prune_columns", column)
        if self.delete_marker is not None:
            self.require("delete_marker", self.delete_marker.column, read=True)
            if self.resolved_strategy not in ("merge", "history") or self.version is None:
                raise ValueError(
                    "delete_marker needs strategy merge or history and a version column"
                )
        if self.resolved_strategy == "history" and self.version is None:
            raise ValueError(
                "strategy history dates each version by the version column: declare version"
            )
        for column in self.erasable_keys:
            self.require("erasable_keys", column)
        for column in self.z_order:
            self.require("z_order", column)
        for column in self.columns:
            if column.date_of is not None:
                self.require(f"{column.name}: date_of", column.date_of, "timestamp", read=True)
        if not self.csv.header:
            renamed = [c.name for c in self.read_columns if c.from_]
            if renamed:
                raise ValueError(
                    f"columns: {', '.join(renamed)}: from: names a header field, but csv.header "
                    "is false (columns are read in declared order: rename the column instead)"
                )
        if self.csv.suffixes and "csv" not in self.formats:
            raise ValueError("csv.suffixes: the source's formats do not include csv")
        if self.prune_columns and self.resolved_strategy not in ("merge", "history"):
            raise ValueError("prune_columns applies to the merge and history strategies only")
        return self

    def require(self, field: str, column: str | None, *kinds: str, read: bool = False) -> None:
        """Refuse ``field`` naming an undeclared column (or a derived one, or of other kinds)."""
        if column is None:
            return
        found = self.column_map.get(column)
        if found is None:
            declared = ", ".join(c.name for c in self.columns)
            raise ValueError(f"{field}: {column!r} is not a declared column (declared: {declared})")
        if read and found.derived:
            raise ValueError(f"{field}: {column!r} is derived; it must be read from files")
        if kinds and not any(_KINDS[k](found.type) for k in kinds):
            raise ValueError(
                f"{field}: {column!r} has type {found.type}; it must be a "
                f"{' or '.join(kinds)} column"
            )

    @functools.cached_property
    def column_map(self) -> dict[str, Column]:
        """The declared columns by name."""
        return {c.name: c for c in self.columns}

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
        raise NotImplementedError

    @property
    def resolved_partition_column(self) -> str | None:
        """The Delta partition column, defaults applied (None: not partitioned)."""
        return None

    def days(self) -> tuple[str | None, dt.date | None]:
        """The column that must equal its file's folder day, and the first partition day."""
        return None, None

    def table_columns(self) -> tuple[TypedColumn, ...]:
        """The lake table's columns in declaration order (only the natural key is not null)."""
        key = set(self.natural_key)
        return tuple(TypedColumn(c.name, c.type, c.name not in key) for c in self.columns)

    def table_schema(self) -> pa.Schema:
        """The lake table's Arrow schema."""
        return arrow_schema(self.table_columns())

    def contract(self) -> SourceContract:
        """The reader's contract for this source."""
        date_column, first_day = self.days()
        return SourceContract(
            name=self.name,
            fields=tuple(c.contract_column(self.null_values) for c in self.read_columns),
            natural_key=tuple(self.natural_key),
            version_column=self.version,
            date_column=date_column,
            daily=not self.snapshot,
            layout_template=self.layout,
            formats=tuple(f for f in FORMATS if f in self.formats),
            timezone=self.timezone,
            separators=self.numbers.separators,
            csv_delimiter=self.csv.delimiter,
            csv_header=self.csv.header,
            csv_trailing_delimiter=self.csv.trailing_delimiter,
            csv_suffixes=self.csv.suffixes,
            encoding=self.encoding,
            rules=tuple(r for c in self.read_columns for r in c.value_rules),
            first_day=first_day,
            last_day=self.last_day if isinstance(self, DailySource) else None,
            max_field_bytes=self.max_field_bytes,
        )

    def derived_rules(self) -> tuple[ValueRule, ...]:
        """Rules on derived columns (checked on table rows, never quarantined)."""
        return tuple(r for c in self.columns if c.derived for r in c.value_rules)


# A day field's JSON schema: a date, or {env: VARIABLE, default: DAY} (day_from_environment).
_DAY_SCHEMA: dict[str, Any] = {"type": "string", "format": "date"}
_DAY_FROM_ENVIRONMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"env": {"type": "string"}, "default": _DAY_SCHEMA},
    "required": ["env"],
    "additionalProperties": False,
}


def day_from_environment(value: Mapping[str, Any]) -> Any:
    """``{env: VARIABLE, default: DAY}``: the variable's value when set, else the default
    (as ``dagster.yaml`` reads ``{env: ...}``); read once, when the declaration loads."""
    unknown = set(value) - {"env", "default"}
    if unknown or not isinstance(value.get("env"), str):
        raise ValueError(
            "a day from the environment is {env: VARIABLE, default: YYYY-MM-DD}"
            + (f"; unknown key(s): {', '.join(sorted(map(str, unknown)))}" if unknown else "")
        )
    found = os.environ.get(value["env"]) or value.get("default")
    if found is None:
        raise ValueError(f"{value['env']} is not set and no default day is given")
    return found


class DailySource(LandingSource):
    """A source with a folder per day, written by partition overwrite or merge."""

    WHY: ClassVar[dict[str, str]] = {
        "first_day": "a daily source needs its first partition day (YYYY-MM-DD)"
    }

    snapshot: Literal[False] = Field(default=False, description="false: a daily source.")
    first_day: Annotated[
        dt.date, WithJsonSchema({"anyOf": [_DAY_SCHEMA, _DAY_FROM_ENVIRONMENT_SCHEMA]})
    ] = Field(
        description="First partition day (YYYY-MM-DD), or {env: VARIABLE, default: YYYY-MM-DD} "
        "to read it from the environment when the code location loads (the shipped example's "
        "days start where `make run`'s sample data starts)."
    )
    last_day: Annotated[
        dt.date | None,
        WithJsonSchema({"anyOf": [_DAY_SCHEMA, _DAY_FROM_ENVIRONMENT_SCHEMA, {"type": "null"}]}),
    ] = Field(
        default=None,
        description="Last partition day, included (YYYY-MM-DD, not before first_day), or "
        "{env: VARIABLE, default: YYYY-MM-DD}; none: partitions run up to today (the shipped "
        "TPC-H example's partitions end where `make run`'s TPC-H data ends).",
    )
    partition_date: str | None = Field(
        default=None, description="Date column that must equal the day of the file's folder."
    )
    partition_column: str | None = Field(
        default=None, description="Delta partition column (default: partition_date for overwrite)."
    )
    backfill: BackfillOptions = Field(default_factory=BackfillOptions)

    @field_validator("first_day", "last_day", mode="before")
    @classmethod
    def _day(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.field_name == "first_day":
            raise ValueError(cls.WHY["first_day"])
        if isinstance(value, Mapping):
            return day_from_environment(value)
        return value

    @field_validator("last_day")
    @classmethod
    def _not_before_first_day(cls, value: dt.date | None, info: ValidationInfo) -> dt.date | None:
        first = info.data.get("first_day")  # absent when first_day itself is refused
        if value is not None and first is not None and value < first:
            raise ValueError(
                f"{value} is before first_day {first}; the partitions run from first_day "
                "through last_day (both included), so last_day is first_day or later"
            )
        return value

    @field_validator("strategy")
    @classmethod
    def _daily_strategy(cls, value: Strategy | None) -> Strategy | None:
        if value == "replace":
            raise ValueError(
                "replace is for snapshot sources; a daily source is written by overwrite, merge "
                "or history"
            )
        return value

    @field_validator("layout")
    @classmethod
    def _names_a_day(cls, value: str | None) -> str | None:
        if value is not None and not Layout(value, "source").daily:
            raise ValueError(
                f"layout {value!r} names no day: add {{date}} (or "
                "{yyyy}/{mm}/{dd}), or set snapshot: true"
            )
        return value

    @model_validator(mode="after")
    def _partitioned(self) -> DailySource:
        self.require("partition_date", self.partition_date, "date", read=True)
        self.require("partition_column", self.partition_column, "date")
        if self.resolved_strategy == "overwrite":
            if self.partition_date is None:
                raise ValueError(
                    "strategy overwrite replaces the run's days, so it needs "
                    "partition_date (the column holding each row's day)"
                )
            if self.resolved_partition_column != self.partition_date:
                raise ValueError(
                    "partition_column: an overwrite table is partitioned by its "
                    f"partition_date {self.partition_date!r}"
                )
        return self

    def days(self) -> tuple[str | None, dt.date | None]:
        """The partition_date column and the first partition day."""
        return self.partition_date, self.first_day

    @property
    def resolved_strategy(self) -> Literal["overwrite", "merge", "history"]:
        """overwrite when a partition_date is declared, else merge (unless declared)."""
        if self.strategy is not None:
            return self.strategy  # type: ignore[return-value]  # replace is refused above
        return "overwrite" if self.partition_date else "merge"

    @property
    def resolved_partition_column(self) -> str | None:
        """The declared partition column, or the partition_date for overwrite."""
        if self.partition_column:
            return self.partition_column
        return self.partition_date if self.resolved_strategy == "overwrite" else None


class SnapshotSource(LandingSource):
    """A source whose newest file is the whole table, replaced atomically or merged."""

    WHY: ClassVar[dict[str, str]] = {
        field: "a snapshot source has no partitions; remove it"
        for field in ("first_day", "last_day", "partition_date", "partition_column")
    }

    snapshot: Literal[True] = Field(description="true: a snapshot source.")

    @field_validator("strategy")
    @classmethod
    def _snapshot_strategy(cls, value: Strategy | None) -> Strategy | None:
        if value in ("overwrite", "history"):
            raise ValueError(f"a snapshot source is written by replace or merge, not {value}")
        return value

    @field_validator("layout")
    @classmethod
    def _names_no_day(cls, value: str | None) -> str | None:
        if value is not None and Layout(value, "source").daily:
            raise ValueError(
                f"layout {value!r} names a day, but a snapshot source has one "
                "folder; drop the day placeholders"
            )
        return value

    @model_validator(mode="after")
    def _no_folder_days(self) -> SnapshotSource:
        folder_days = [c.name for c in self.columns if c.folder_day]
        if folder_days:
            raise ValueError(
                f"columns: {', '.join(folder_days)}: folder_day is the day of a daily "
                "source's folder; a snapshot source has none"
            )
        return self

    @property
    def resolved_strategy(self) -> Literal["replace", "merge"]:
        """replace unless merge is declared."""
        return "merge" if self.strategy == "merge" else "replace"


def kind_of(data: dict[str, Any]) -> type[LandingSource]:
    """The kind a declaration's snapshot flag names (a flag that is not a bool: daily, where
    it is then refused with what is allowed)."""
    try:
        snapshot = TypeAdapter(bool).validate_python(data.get("snapshot", False))
    except ValidationError:
        return DailySource
    return SnapshotSource if snapshot else DailySource


def _refuse_doubles(field: str, message: str, names: list[str]) -> None:
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"{field}: {message.format(', '.join(doubled))}")
