"""What an input reads: the upstream table's rows of the input's (mapped) partitions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg
from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.io_manager.slices import PartitionSlice, arrow_type_of, partition_slice
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.lake import LakeTable, date_range, read_rows
from idem_assets.lake.frames import as_type
from idem_assets.lake.predicates import quote_identifier
from idem_assets.lake.tables import table_schema

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


def read(spec: WriteSpec, target: LakeTable, window: Window, schema: pa.Schema | None) -> pa.Table:
    """The rows a downstream asset sees for ``window`` (the whole table if unpartitioned)."""
    table = target.open()
    ranges = []
    if window.partitioned and spec.partition_column:
        assert window.start is not None and window.end is not None
        ranges.append(date_range(spec.partition_column, window.start, window.end))
    if table is None:
        if schema is None:
            raise FileNotFoundError(f"no Delta table at {target.uri}; materialize it first")
        return schema.empty_table()
    return read_rows(table, ranges=ranges)


def read_input(context: dg.InputContext, spec: WriteSpec, target: LakeTable) -> Any:
    """The rows of ``target`` the input maps to, as the input's annotation asks."""
    upstream = context.upstream_output
    assert upstream is not None
    kind = context.dagster_type.typing_type
    as_type(pa.table({}), kind)  # an unsupported annotation fails before any read
    table = target.open()
    columns = _columns(context)
    covered = _input_slice(context, spec, table)
    if table is None and not covered.empty:
        name = upstream.asset_key.to_user_string() if upstream.has_asset_key else upstream.name
        raise FileNotFoundError(f"no Delta table at {target.uri}: materialize {name} first")
    if covered.empty:
        # The mapped upstream partitions do not exist (a self-dependent asset's first
        # partition): no rows, with the table's columns when there is a table.
        if table is None:
            return as_type(pa.table({}), kind)
        stored = table_schema(table)
        wanted = stored if columns is None else pa.schema([stored.field(c) for c in columns])
        return as_type(wanted.empty_table(), kind)
    rows = read_rows(table, ranges=covered.conditions, columns=columns)
    return as_type(rows, kind)


def _columns(context: dg.InputContext) -> list[str] | None:
    metadata = context.definition_metadata or {}
    columns = getattr(metadata.get("columns"), "value", metadata.get("columns"))
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise ValueError(
            f"input metadata 'columns' must be a list of column names, got {columns!r}"
        )
    for column in columns:
        quote_identifier(column)  # plain identifiers only
    return list(columns)


def _input_slice(
    context: dg.InputContext, spec: WriteSpec, table: DeltaTable | None
) -> PartitionSlice:
    """The upstream partitions an input reads (partition mappings applied by Dagster)."""
    if not context.has_asset_partitions:
        return PartitionSlice.whole_table()
    columns = spec.partition_columns
    if columns is None:
        return PartitionSlice.whole_table()
    schema = table_schema(table) if table is not None else None
    return partition_slice(context, columns, arrow_type_of(schema))
