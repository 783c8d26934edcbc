"""Per-asset write configuration, carried in asset metadata under ``idem/*`` keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from idem_assets.lake.predicates import is_identifier

PREFIX = "idem/"
# The metadata key of the columns an asset declares erasable (``WriteSpec.erasable_keys_in``).
ERASABLE_KEYS = f"{PREFIX}erasable_keys"
# The landing source whose rows an asset loads (its quarantine rows are named by it).
LANDING_SOURCE = f"{PREFIX}landing_source"
_TABLE = re.compile(r"^[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*$")

Strategy = Literal["overwrite", "merge", "replace", "append", "history"]

STRATEGY_DESCRIPTIONS: dict[str, str] = {
    "overwrite": "replaceWhere: the run's [start, end) partitions are replaced in one commit",
    "merge": "MERGE on the natural key; newest version wins; unchanged rows are not rewritten",
    "replace": "atomic full replace in one commit; readers never see the table empty",
    "append": "exactly-once append committed with a Delta txn (app id, version)",
    "history": "SCD type 2: a row per version (valid_from/valid_to/is_current from the "
    "version column), only the affected keys rewritten, in one MERGE",
}


class WriteSpec(BaseModel):
    """How the IO manager writes an asset's output to its Delta table.

    An asset carries it as definition metadata (``idem/*`` keys), so the IO manager, the
    checks and ``idem-assets`` read the same settings.

    Example:
        >>> from idem_assets import WriteSpec
        >>> spec = WriteSpec(
        ...     strategy="merge", natural_key=("customer_id",), version_column="updated_at"
        ... )
        >>> metadata = spec.to_metadata()  # what @dg.asset(metadata=...) takes
        >>> metadata["idem/strategy"], metadata["idem/natural_key"]
        ('merge', ['customer_id'])
        >>> WriteSpec.from_metadata(metadata) == spec
        True
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")

    strategy: Strategy = Field(description="Idempotent write strategy for this table.")
    natural_key: tuple[str, ...] = Field(
        default=(), description="Columns that identify a row; deduplicated and unique-checked."
    )
    version_column: str | None = Field(
        default=None, description="Newest value wins when a natural key repeats."
    )
    partition_column: str | None = Field(
        default=None,
        description="Date column that holds the Dagster partition (overwrite) or lays out "
        "the Delta table in folders (merge).",
    )
    prune_columns: tuple[str, ...] = Field(
        default=(),
        description="Columns whose batch [min, max] goes into the MERGE predicate so "
        "untouched files are skipped.",
    )
    dedupe: bool = Field(default=True, description="Keep one row per natural key before writing.")
    delete_column: str | None = Field(
        default=None,
        description="Merge and history: the column that marks a row as a delete of its key "
        "(not stored); ordered by version_column like an update, a delete winning a tie.",
    )
    delete_value: str | bool = Field(
        default=True,
        description="The delete_column value that means delete (e.g. 'D' for an op column).",
    )
    erasable_keys: tuple[str, ...] = Field(
        default=(),
        description="Columns that identify a person (e.g. customer_id): `idem-assets erase` "
        "removes a key's rows from the table, and every later write filters it out.",
    )
    table: str | None = Field(
        default=None, description="Table path under the lake root; defaults to the asset key."
    )
    allow_empty: bool = Field(
        default=False, description="Replace only: accept an empty output as the new table."
    )
    partition_expr: str | dict[str, str] | None = Field(
        default=None,
        description="dagster-deltalake's partition_expr: the column holding the asset's "
        "partitions, or a mapping of dimension name to column for multi-partitions. "
        "Overwrite replaces exactly the run's partitions of it.",
    )

    @field_validator("natural_key", "prune_columns", "erasable_keys")
    @classmethod
    def _identifiers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            _check_identifier(name)
        return value

    @field_validator("version_column", "partition_column", "delete_column")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        return _check_identifier(value) if value is not None else None

    @field_validator("partition_expr")
    @classmethod
    def _partition_expr(cls, value: str | dict[str, str] | None) -> str | dict[str, str] | None:
        if isinstance(value, dict):
            for column in value.values():
                _check_identifier(column)
        elif value is not None:
            _check_identifier(value)
        return value

    @field_validator("table")
    @classmethod
    def _table(cls, value: str | None) -> str | None:
        if value is not None and not _TABLE.match(value):
            raise ValueError(f"table must be slash-separated plain names, got {value!r}")
        return value

    @model_validator(mode="after")
    def _complete(self) -> WriteSpec:
        if self.strategy == "overwrite" and not (self.partition_column or self.partition_expr):
            raise ValueError("overwrite needs partition_column (or partition_expr)")
        if self.strategy == "merge" and not self.natural_key:
            raise ValueError("merge needs natural_key")
        if self.strategy == "history" and not (self.natural_key and self.version_column):
            raise ValueError("history needs natural_key and version_column")
        if self.delete_column is not None and (
            self.strategy not in ("merge", "history") or self.version_column is None
        ):
            raise ValueError("delete_column needs strategy merge or history and a version_column")
        if self.dedupe and self.strategy != "append" and not self.natural_key:
            raise ValueError("dedupe needs natural_key (or set dedupe=False)")
        return self

    def to_metadata(self) -> dict[str, Any]:
        """Flat ``idem/*`` metadata entries (readable in the UI, parsed back by the IO manager)."""
        # Defaults are left out so each asset shows only what it sets.
        data = self.model_dump(exclude_none=True, exclude_defaults=True)
        data["strategy"] = self.strategy
        entries = {f"{PREFIX}{name}": _plain(value) for name, value in data.items()}
        entries[f"{PREFIX}strategy_description"] = STRATEGY_DESCRIPTIONS[self.strategy]
        return entries

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> WriteSpec:
        """Parse the ``idem/*`` entries of asset metadata (raw or MetadataValue)."""
        fields = _idem_fields(metadata)
        if "strategy" not in fields:
            raise ValueError(
                f"asset metadata has no {PREFIX}strategy: "
                "declare it with WriteSpec(...).to_metadata()"
            )
        return cls.model_validate(fields)

    @classmethod
    def for_output(cls, metadata: Mapping[str, Any], partitioned: bool) -> WriteSpec:
        """The spec of an output: its ``idem/*`` metadata, else what dagster-deltalake reads.

        Without ``idem/strategy``, a partitioned output replaces exactly its partitions of
        the ``partition_expr`` column(s), in one commit; an unpartitioned one replaces the
        whole table atomically. ``idem/*`` entries (merge, keys, version, dedupe) refine it.
        """
        fields = _idem_fields(metadata)
        expr = _plain_metadata(metadata.get("partition_expr"))
        if expr is not None and "partition_expr" not in fields:
            fields["partition_expr"] = expr
        if "strategy" not in fields:
            fields["strategy"] = "overwrite" if partitioned else "replace"
            fields.setdefault("dedupe", bool(fields.get("natural_key")))
            if not partitioned:
                fields.setdefault("allow_empty", True)
        if fields["strategy"] == "overwrite" and not (
            fields.get("partition_expr") or fields.get("partition_column")
        ):
            raise ValueError(
                "the output has partitions, but no 'partition_expr' metadata value, so it is "
                "not known which column holds them. Set it, e.g. "
                '@asset(metadata={"partition_expr": "your_partition_column"})'
            )
        return cls.model_validate(fields)

    @classmethod
    def erasable_keys_in(cls, metadata: Mapping[str, Any]) -> tuple[str, ...]:
        """The columns an asset's definition metadata declares erasable
        (``idem/erasable_keys``), read the same way whatever writes the asset: an
        ``idem/strategy`` (this spec's ``erasable_keys``) or one of dagster-delta's modes.
        ``idem-assets erase`` finds the tables it erases from by the same reading."""
        value = _plain_metadata(metadata.get(ERASABLE_KEYS))
        if value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ValueError(f"{ERASABLE_KEYS} takes a list of column names, got {value!r}")
        return cls._identifiers(tuple(value))

    @classmethod
    def table_in(cls, metadata: Mapping[str, Any]) -> str | None:
        """The ``idem/table`` of an asset's definition metadata (None: the asset key path)."""
        value = _plain_metadata(metadata.get(f"{PREFIX}table"))
        return cls._table(value) if value is not None else None

    @property
    def partition_columns(self) -> str | dict[str, str] | None:
        """The column(s) holding the Dagster partitions (overwrite), in partition_expr form."""
        return self.partition_expr or self.partition_column


def _plain_metadata(value: Any) -> Any:
    value = getattr(value, "value", value)
    return dict(value) if isinstance(value, Mapping) else value


def _idem_fields(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key[len(PREFIX) :]: _plain_metadata(value)
        for key, value in metadata.items()
        if key.startswith(PREFIX) and key[len(PREFIX) :] in WriteSpec.model_fields
    }


def _check_identifier(name: str) -> str:
    if not is_identifier(name):
        raise ValueError(f"not a plain column identifier: {name!r}")
    return name


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
