"""The IO manager's configuration, and the one place an output's write is resolved from it.

The fields are dagster-deltalake's construction, dagster-delta's modes, and where the
tables and the write records are; what a field means is said once, here, and shown in the
Dagster UI. A per-output setting comes from the output's runtime metadata, then its
definition metadata, then the IO manager (``setting``); the erasable keys from the
definition metadata only (``WriteSpec.erasable_keys_in``), where ``idem-assets erase``
finds them too. ``DeltaIOManagerConfig._resolve`` turns one output into the ``ResolvedWrite``
the manager carries out (``manager.py``): its strategy (an ``idem/strategy`` bound to its
``WriteSpec``, or one of dagster-delta's modes bound to its ``ModeWrite``), its table, the
partitions it covers, its commit's options and metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg
from deltalake import DeltaTable
from pydantic import Field, field_validator, model_validator

from idem_assets._deltalake_config import (
    AzureConfig,
    ClientConfig,
    GcsConfig,
    LocalConfig,
    S3Config,
)
from idem_assets._lazy import lazy_module
from idem_assets.io_manager.delta_modes import (
    TABLE_CONFIGURATION_KEY,
    MergeConfig,
    ModeWrite,
    SchemaMode,
    WriteMode,
    clause_merge,
    tables_only,
)
from idem_assets.io_manager.location import TablePath, dropin_path, lake_path
from idem_assets.io_manager.output import TableOutput, is_spark_frame
from idem_assets.io_manager.slices import (
    PartitionSlice,
    arrow_type_of,
    partition_slice,
    partitions_label,
)
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.writes import WriteStrategy, strategy_for, strategy_for_mode
from idem_assets.lake import LakeTable, WriteOptions
from idem_assets.lake.tables import table_schema
from idem_assets.resources import CheckpointResource, LakeResource, storage_option_values

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclass(frozen=True)
class ResolvedWrite:
    """One output's write, resolved once from its settings before anything is claimed."""

    output: TableOutput  # as handed over (frames as Arrow tables)
    strategy: WriteStrategy
    target: LakeTable
    name: str  # the table's name in the lake, the scope of its write records
    table: DeltaTable | None  # the table as it is before the write (None: not created yet)
    covered: PartitionSlice


class DeltaIOManagerConfig(dg.ConfigurableIOManager):
    """The configuration of ``IdempotentDeltaIOManager``, and where it finds tables."""

    root_uri: str | None = Field(
        default=None,
        description="Storage location of the Delta tables, as dagster-deltalake's root_uri: "
        "tables at <root>/<schema>/<table>. Leave unset to use `lake` instead.",
    )
    storage_options: AzureConfig | S3Config | LocalConfig | GcsConfig = Field(
        default=LocalConfig(),
        discriminator="provider",
        description="dagster-deltalake's storage configuration for root_uri (pass "
        "credentials as dg.EnvVar).",
    )
    client_options: ClientConfig | None = Field(
        default=None, description="dagster-deltalake's http client configuration."
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Schema (parent folder) of every table, as in dagster-deltalake.",
    )
    mode: WriteMode = Field(
        default=WriteMode.overwrite,
        description="How outputs are written, as in dagster-delta: overwrite (replace exactly "
        "the output's partitions, or its table), merge (merge_config), append (exactly once "
        "per output), error (create; a rerun of the same rows is a no-op), ignore (create "
        "if absent) or create_or_replace (replace the whole table). An asset's 'mode' "
        "metadata overrides it. Every mode commits nothing on an unchanged rerun.",
    )
    merge_config: MergeConfig | None = Field(
        default=None,
        description="dagster-delta's MergeConfig for mode='merge': merge_type, predicate, "
        "aliases; an asset's 'merge_predicate' and 'merge_operations_config' override it.",
    )
    schema_mode: SchemaMode | None = Field(
        default=None,
        description="merge: add an output's new columns to the table (stored rows read "
        "null), in every mode; overwrite: let a replace change the table's columns.",
    )
    commit_properties: dict[str, Any] | None = Field(
        default=None,
        description="delta-rs CommitProperties fields; custom_metadata entries are added to "
        "every commit (commit retries stay ours).",
    )
    writer_engine: str = Field(
        default="rust",
        description="Accepted for dagster-deltalake compatibility: deltalake "
        "1.x writes with its Rust engine whatever this says.",
    )
    overwrite_schema: bool = Field(
        default=False,
        description="Let an output change its table's columns (a replace "
        "overwrites the schema; a partition overwrite adds new columns).",
    )
    table_config: dict[str, str] | None = Field(
        default=None, description="Delta table configuration set when a table is created."
    )
    custom_metadata: dict[str, str] | None = Field(
        default=None, description="Entries added to every commit's metadata."
    )
    writer_properties: dict[str, str] | None = Field(
        default=None, description="Parquet writer properties (delta-rs WriterProperties)."
    )
    lake: LakeResource | None = Field(
        default=None,
        description="The project's lake: tables at <lake>/<asset key path>. "
        "Used when root_uri is unset.",
    )
    checkpoint: CheckpointResource | None = Field(
        default=None,
        description="Where write records are kept. Unset: IDEM_STATE_URL, else "
        "SQLite in <root>/_idem_state/ for a local root (see docs/migrating.md for object "
        "storage).",
    )
    write_lease_seconds: float = Field(
        default=60.0,
        description="Lease on a write's checkpoint record, renewed while the write runs; a "
        "crashed run's record is reconciled this long after it stopped renewing.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> WriteMode:
        return mode_of(value)

    @model_validator(mode="after")
    def _merge_configured(self) -> DeltaIOManagerConfig:
        if self.mode is WriteMode.merge and self.merge_config is None:
            raise ValueError(
                "mode='merge' needs merge_config, e.g. MergeConfig(merge_type=MergeType.upsert, "
                "predicate='s.id = t.id', source_alias='s', target_alias='t')"
            )
        return self

    # --- where tables are ---------------------------------------------------------------

    def _root(self) -> str | None:
        return self.root_uri.rstrip("/") if self.root_uri else None

    def _options(self) -> dict[str, str]:
        return storage_option_values(self.storage_options, self.client_options)

    def _path(self, context: dg.OutputContext, table: str | None) -> TablePath:
        if self._root() is not None:
            located = dropin_path(context, self.schema_)
        else:
            located = lake_path(context)
        if table:
            return TablePath(table, located.name)
        return located

    def _table(self, context: dg.OutputContext, spec: WriteSpec) -> tuple[LakeTable, str]:
        return self._located(context, spec.table)

    def _located(self, context: dg.OutputContext, table: str | None) -> tuple[LakeTable, str]:
        located = self._path(context, table)
        root = self._root()
        if root is not None:
            return LakeTable(f"{root}/{located.path}", self._options()), located.name
        lake = self.lake or LakeResource()
        return lake.table(located.path), located.name

    def _checkpoint(self) -> CheckpointResource:
        if self.checkpoint is not None:
            return self.checkpoint
        root = self._root()
        return CheckpointResource.beside(root) if root is not None else CheckpointResource()

    def _commit_extras(self, context: dg.OutputContext) -> dict[str, str]:
        """The configured commit metadata (``custom_metadata``, and ``commit_properties``'
        custom_metadata, of the manager and then of the output)."""
        entries: dict[str, Any] = {}
        for properties in (self.commit_properties, setting(context, "commit_properties")):
            if isinstance(properties, dict) and isinstance(properties.get("custom_metadata"), dict):
                entries.update(properties["custom_metadata"])
        entries.update(self.custom_metadata or {})
        own = setting(context, "custom_metadata")
        if isinstance(own, dict):
            entries.update(own)
        return {str(k): str(v) for k, v in entries.items()}

    # --- one output's write ---------------------------------------------------------------

    def _resolve(self, context: dg.OutputContext, obj: object) -> ResolvedWrite:
        """The output's write, made once: an ``idem/strategy`` bound to the output's spec or
        one of dagster-delta's modes bound to its settings; the table it writes, as it is
        now, and the partitions it covers."""
        output = TableOutput.handed_over(obj)
        mode = mode_of(setting(context, "mode") or self.mode)
        if mode in (WriteMode.merge, WriteMode.append, WriteMode.error, WriteMode.ignore):
            if output.rows is None or is_spark_frame(output.rows):
                raise ValueError(tables_only(mode.value))
            plan, mode_covered = mode_write(
                context,
                mode,
                output.rows.schema,  # type: ignore[union-attr]
                merge_config=self.merge_config,
                schema_mode=self.schema_mode,
                writer_properties=self.writer_properties,
                table_config=self._table_config(context),
            )
            strategy: WriteStrategy = strategy_for_mode(plan, mode_covered)
            target, name = self._located(context, setting(context, "idem/table"))
        else:
            metadata = context.definition_metadata or {}
            if mode is WriteMode.create_or_replace:
                if context.has_asset_partitions:
                    raise ValueError(
                        "mode 'create_or_replace' replaces the whole table, and this output "
                        "has partitions; use mode 'overwrite' with partition_expr to replace "
                        "them"
                    )
                metadata = {**metadata, "idem/strategy": "replace", "idem/allow_empty": True}
            spec = WriteSpec.for_output(metadata, context.has_asset_partitions)
            strategy = strategy_for(spec)
            target, name = self._table(context, spec)
        table = target.open()
        covered = strategy.covers(context, _schema_of(output, table))
        return ResolvedWrite(output, strategy, target, name, table, covered)

    def _commit_metadata(
        self, context: dg.OutputContext, name: str, covered: PartitionSlice
    ) -> dict[str, Any]:
        """What every commit of the output carries: the configured entries, then the asset,
        its window and its run."""
        return {
            **self._commit_extras(context),
            "idem.asset": name,
            "idem.window": covered.display,
            "idem.run_id": context.run_id,
        }

    def _write_options(self, context: dg.OutputContext) -> WriteOptions:
        """How the output's files are written and its table created."""
        schema_mode = setting(context, "schema_mode")
        return WriteOptions(
            table_config=self._table_config(context),
            writer_properties=setting(context, "writer_properties") or self.writer_properties,
            evolve_schema=self.overwrite_schema
            or (schema_mode_of(schema_mode or self.schema_mode) is not None),
        )

    def _table_config(self, context: dg.OutputContext) -> dict[str, str] | None:
        """Table configuration for a table-creating write: the asset's
        ``table_configuration`` metadata, then the manager's ``table_config`` (as in
        dagster-delta)."""
        own = setting(context, TABLE_CONFIGURATION_KEY)
        merged = {**(own or {}), **(self.table_config or {})}
        return {str(k): str(v) for k, v in merged.items()} or None


def _schema_of(output: TableOutput, table: DeltaTable | None) -> pa.Schema | None:
    rows = output.rows
    if isinstance(rows, pa.Table | pa.RecordBatchReader):
        return rows.schema
    if output.schema is not None:
        return output.schema
    return table_schema(table) if table is not None else None


# --- per-output settings, as dagster-delta resolves them -----------------------------------


def mode_write(
    context: dg.OutputContext,
    mode: WriteMode,
    schema: pa.Schema,
    *,
    merge_config: MergeConfig | None,
    schema_mode: SchemaMode | None,
    writer_properties: Mapping[str, str] | None,
    table_config: Mapping[str, str] | None,
) -> tuple[ModeWrite, PartitionSlice]:
    """The write of an output in ``mode``, with the manager's settings as defaults, and the
    partitions it covers."""
    expr = setting(context, "partition_expr")
    chosen = schema_mode_of(setting(context, "schema_mode") or schema_mode)
    covered = _mode_slice(context, expr, schema)
    merge = None
    if mode is WriteMode.merge:
        if chosen is SchemaMode.overwrite:
            raise ValueError(
                "schema_mode 'overwrite' cannot be used with mode 'merge' (a MERGE keeps "
                "the table's columns and may add new ones: schema_mode 'merge')"
            )
        merge = clause_merge(
            setting(context, "merge_config") or merge_config,
            predicate=setting(context, "merge_predicate"),
            operations=setting(context, "merge_operations_config"),
            merge_schema=chosen is SchemaMode.merge,
        )
    writer = setting(context, "writer_properties") or writer_properties
    plan = ModeWrite(
        mode=mode.value,
        merge=merge,
        schema_mode=chosen.value if chosen else None,
        scope=covered.conditions,
        partition_by=covered.partition_by,
        partitioned=context.has_asset_partitions,
        writer_properties=dict(writer) if writer else None,
        table_config=table_config,
        erasable_keys=WriteSpec.erasable_keys_in(context.definition_metadata or {}),
    )
    return plan, covered


def upstream_mode(upstream: dg.OutputContext, default: WriteMode) -> WriteMode:
    metadata = upstream.definition_metadata or {}
    return mode_of(getattr(metadata.get("mode"), "value", metadata.get("mode")) or default)


def mode_of(value: Any) -> WriteMode:
    """A write mode from its value or name; an unknown one is a clear error."""
    raw = getattr(value, "value", value)
    for mode in WriteMode:
        if raw in (mode, mode.value, mode.name):
            return mode
    raise ValueError(f"unknown mode {raw!r}: one of {', '.join(m.value for m in WriteMode)}")


def schema_mode_of(value: Any) -> SchemaMode | None:
    """A schema mode from its value or name (None when unset)."""
    raw = getattr(value, "value", value)
    if raw is None:
        return None
    for mode in SchemaMode:
        if raw in (mode, mode.value, mode.name):
            return mode
    raise ValueError(f"unknown schema_mode {raw!r}: one of overwrite, merge")


def setting(context: dg.OutputContext, key: str) -> Any:
    """A per-output setting as dagster-delta finds it: the output's runtime metadata, then
    its definition metadata (MetadataValue unwrapped)."""
    for source in (_runtime_metadata(context), context.definition_metadata or {}):
        if key in source:
            value = source[key]
            value = getattr(value, "value", value) if isinstance(value, dg.MetadataValue) else value
            return dict(value) if isinstance(value, dict) else value
    return None


def _runtime_metadata(context: dg.OutputContext) -> dict[str, Any]:
    try:
        return dict(context.output_metadata or {})
    except Exception:  # no runtime metadata outside a step (build_output_context)
        return {}


def _mode_slice(context: dg.OutputContext, expr: Any, schema: pa.Schema) -> PartitionSlice:
    """The partitions of an output in a dagster-delta mode (whole table when none)."""
    if not context.has_asset_partitions:
        return PartitionSlice.whole_table()
    if expr:
        return partition_slice(context, expr, arrow_type_of(schema))
    label, days = partitions_label(context)
    return PartitionSlice((), (), label, days)
