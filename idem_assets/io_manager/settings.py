"""Per-output settings as dagster-delta resolves them, and the write they make.

A setting comes from the output's runtime metadata, then its definition metadata, then
the IO manager (``setting``); the erasable keys come from the definition metadata only
(``WriteSpec.erasable_keys_in``), where ``idem-assets erase`` finds them too.
``mode_write`` turns an output in one of the merge, append, error and ignore modes into
the ``ModeWrite`` its strategy (``io_manager.writes``) carries out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.io_manager.delta_modes import (
    MergeConfig,
    ModeWrite,
    SchemaMode,
    WriteMode,
    clause_merge,
)
from idem_assets.io_manager.slices import (
    PartitionSlice,
    arrow_type_of,
    partition_slice,
    partitions_label,
)
from idem_assets.io_manager.spec import WriteSpec

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


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


# The output metadata key of a table-creating write's Delta table configuration
# (dagster-delta's name for it).
TABLE_CONFIGURATION_KEY = "table_configuration"


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
