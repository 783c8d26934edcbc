"""dagster-delta's write modes and merge configuration, by its names and semantics.

A project configured for dagster-delta (``mode="merge"`` with a ``MergeConfig``,
``schema_mode``, per-asset ``merge_predicate``) switches to ``IdempotentDeltaIOManager`` by
changing its imports. The classes here are dagster ``Config`` classes with dagster-delta's
field names; ``clause_merge`` turns them into the lake layer's ``ClauseMerge``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import dagster as dg

from idem_assets.lake import Fingerprint, WriteOptions
from idem_assets.lake.clauses import Clause, ClauseMerge, MergeConfigError
from idem_assets.lake.predicates import Condition

# The output metadata key of a table-creating write's Delta table configuration
# (dagster-delta's name for it).
TABLE_CONFIGURATION_KEY = "table_configuration"


class WriteMode(StrEnum):
    """How an output is written (dagster-delta's ``WriteMode``)."""

    error = "error"
    append = "append"
    overwrite = "overwrite"
    ignore = "ignore"
    merge = "merge"
    create_or_replace = "create_or_replace"


class SchemaMode(StrEnum):
    """How an output's new columns reach the table (dagster-delta's ``SchemaMode``)."""

    overwrite = "overwrite"
    merge = "merge"


class MergeType(StrEnum):
    """The merge types of dagster-delta.

    - deduplicate_insert: insert source rows no target row matches
    - update_only: update matched target rows
    - upsert: update matched rows and insert unmatched ones
    - replace_and_delete_unmatched: update matched rows, delete target rows no source row
      matches (in a partitioned merge: of the output's partitions), insert nothing
    - custom: the clauses of ``merge_operations_config``
    """

    deduplicate_insert = "deduplicate_insert"
    update_only = "update_only"
    upsert = "upsert"
    replace_delete_unmatched = "replace_and_delete_unmatched"
    custom = "custom"


class OperationConfig(dg.Config):
    """A clause with an optional condition."""

    predicate: str | None = None


class OperationAllConfig(dg.Config):
    """A clause over all columns, some excepted."""

    predicate: str | None = None
    except_cols: list[str] | None = None


class OperationWithUpdatesConfig(dg.Config):
    """A clause that sets the given columns to the given expressions."""

    updates: dict[str, str]
    predicate: str | None = None


class WhenNotMatchedInsert(OperationWithUpdatesConfig):
    """WHEN NOT MATCHED THEN INSERT (columns = expressions)."""


class WhenNotMatchedInsertAll(OperationAllConfig):
    """WHEN NOT MATCHED THEN INSERT *."""


class WhenMatchedUpdate(OperationWithUpdatesConfig):
    """WHEN MATCHED THEN UPDATE SET columns = expressions."""


class WhenMatchedUpdateAll(OperationAllConfig):
    """WHEN MATCHED THEN UPDATE SET *."""


class WhenMatchedDelete(OperationConfig):
    """WHEN MATCHED THEN DELETE."""


class WhenNotMatchedBySourceDelete(OperationConfig):
    """WHEN NOT MATCHED BY SOURCE THEN DELETE."""


class WhenNotMatchedBySourceUpdate(OperationWithUpdatesConfig):
    """WHEN NOT MATCHED BY SOURCE THEN UPDATE SET columns = expressions."""


class MergeOperationsConfig(dg.Config):
    """The clauses of a ``custom`` merge, applied in dagster-delta's order: not-matched
    inserts, inserts-all, matched updates, updates-all, matched deletes, not-matched-by-
    source deletes, not-matched-by-source updates (each list in its given order)."""

    when_not_matched_insert: list[WhenNotMatchedInsert] | None = None
    when_not_matched_insert_all: list[WhenNotMatchedInsertAll] | None = None
    when_matched_update: list[WhenMatchedUpdate] | None = None
    when_matched_update_all: list[WhenMatchedUpdateAll] | None = None
    when_matched_delete: list[WhenMatchedDelete] | None = None
    when_not_matched_by_source_delete: list[WhenNotMatchedBySourceDelete] | None = None
    when_not_matched_by_source_update: list[WhenNotMatchedBySourceUpdate] | None = None


class MergeConfig(dg.Config):
    """Configuration of ``mode="merge"`` (dagster-delta's ``MergeConfig``)."""

    merge_type: MergeType
    predicate: str | None = None
    source_alias: str | None = None
    target_alias: str | None = None
    error_on_type_mismatch: bool = True
    merge_operations_config: MergeOperationsConfig | None = None


# dagster-delta's order of clause kinds in a custom merge.
_CUSTOM_ORDER = (
    "when_not_matched_insert",
    "when_not_matched_insert_all",
    "when_matched_update",
    "when_matched_update_all",
    "when_matched_delete",
    "when_not_matched_by_source_delete",
    "when_not_matched_by_source_update",
)

_STANDARD = {
    MergeType.deduplicate_insert: ("when_not_matched_insert_all",),
    MergeType.update_only: ("when_matched_update_all",),
    MergeType.upsert: ("when_matched_update_all", "when_not_matched_insert_all"),
    MergeType.replace_delete_unmatched: (
        "when_matched_update_all",
        "when_not_matched_by_source_delete",
    ),
}


def merge_type_of(value: Any) -> MergeType:
    """A merge type from its value or name; an unknown one is a clear error."""
    raw = getattr(value, "value", value)
    for member in MergeType:
        if raw in (member.value, member.name):
            return member
    known = ", ".join(m.value for m in MergeType)
    raise MergeConfigError(f"unknown merge_type {raw!r}: one of {known}")


def clause_merge(
    config: MergeConfig | Mapping[str, Any] | None,
    *,
    predicate: str | None = None,
    operations: MergeOperationsConfig | Mapping[str, Any] | None = None,
    merge_schema: bool = False,
) -> ClauseMerge:
    """The merge an output runs: the IO manager's ``merge_config`` with an asset's
    ``merge_predicate`` and ``merge_operations_config`` metadata taking precedence."""
    if config is None:
        raise MergeConfigError(
            "mode='merge' needs merge_config, e.g. MergeConfig(merge_type=MergeType.upsert, "
            "predicate='s.id = t.id', source_alias='s', target_alias='t')"
        )
    fields = dict(config) if isinstance(config, Mapping) else config.model_dump()
    merge_type = merge_type_of(fields.get("merge_type"))
    chosen = predicate or fields.get("predicate")
    if not chosen or not str(chosen).strip():
        raise MergeConfigError(
            "merge predicate was not provided: set MergeConfig(predicate=...) or the asset's "
            "'merge_predicate' metadata, e.g. 's.id = t.id'"
        )
    if merge_type is MergeType.custom:
        chosen_operations = operations or fields.get("merge_operations_config")
        if not chosen_operations:
            raise MergeConfigError(
                "merge_type 'custom' needs merge_operations_config (on MergeConfig or as the "
                "asset's 'merge_operations_config' metadata)"
            )
        clauses = _custom_clauses(chosen_operations)
        if not clauses:
            raise MergeConfigError("merge_operations_config lists no clause")
    else:
        clauses = tuple(Clause(kind) for kind in _STANDARD[merge_type])  # type: ignore[arg-type]
    return ClauseMerge(
        predicate=str(chosen),
        clauses=clauses,
        source_alias=fields.get("source_alias"),
        target_alias=fields.get("target_alias"),
        error_on_type_mismatch=bool(fields.get("error_on_type_mismatch", True)),
        merge_schema=merge_schema,
    )


def _custom_clauses(operations: MergeOperationsConfig | Mapping[str, Any]) -> tuple[Clause, ...]:
    if isinstance(operations, Mapping):
        operations = MergeOperationsConfig.model_validate(dict(operations))
    clauses = []
    for kind in _CUSTOM_ORDER:
        for item in getattr(operations, kind) or ():
            clauses.append(
                Clause(
                    kind,  # type: ignore[arg-type]
                    predicate=item.predicate,
                    updates=getattr(item, "updates", None),
                    except_cols=getattr(item, "except_cols", None),
                )
            )
    return tuple(clauses)


@dataclass(frozen=True)
class ModeWrite:
    """One output's write in a dagster-delta mode, as the manager resolved its settings."""

    mode: str
    merge: ClauseMerge | None = None
    schema_mode: str | None = None
    # The output's partitions (a merge's scope, the files an append's proof signs).
    scope: tuple[Condition, ...] = ()
    partition_by: tuple[str, ...] = ()
    partitioned: bool = False
    writer_properties: Mapping[str, Any] | None = None
    table_config: Mapping[str, str] | None = None
    # The columns whose erased keys the write leaves out (``idem/erasable_keys``).
    erasable_keys: tuple[str, ...] = ()

    def options(self) -> WriteOptions:
        """How files are written and a table is created (and whether columns are added)."""
        return WriteOptions(
            table_config=self.table_config,
            writer_properties=self.writer_properties,
            evolve_schema=self.schema_mode == "merge",
        )

    def proof_key(self, content: Fingerprint) -> str:
        """What a settled write must match to vouch for this one: rows and configuration."""
        described = f"{self.mode}\n{self.merge.describe() if self.merge else ''}"
        return f"{content}|{hashlib.sha256(described.encode()).hexdigest()[:16]}"


def tables_only(mode: str) -> str:
    """Why an output in one of dagster-delta's modes cannot be a Spark DataFrame."""
    return (
        f"mode {mode!r} writes tables (pyarrow, polars, pandas); "
        "a Spark DataFrame is written with mode 'overwrite'"
    )
