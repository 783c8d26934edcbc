"""Conversions between the frame types the lake accepts (Arrow, Polars, pandas)."""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

FrameLike = pa.Table | pl.DataFrame | Any


def to_arrow(data: FrameLike) -> pa.Table:
    """Any supported frame as a ``pyarrow.Table`` (no copy where possible)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pl.DataFrame):
        return data.to_arrow()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    module = type(data).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(
        f"cannot write a {type(data).__name__}: return a pyarrow.Table, polars or pandas DataFrame"
    )


def to_polars(data: FrameLike) -> pl.DataFrame:
    """Any supported frame as a Polars DataFrame."""
    if isinstance(data, pl.DataFrame):
        return data
    frame = pl.from_arrow(to_arrow(data))
    assert isinstance(frame, pl.DataFrame)
    return frame


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and cast ``table`` to ``schema``; a missing column is a clear error."""
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise ValueError(
            f"data lacks column(s) {missing} required by the table schema {schema.names}"
        )
    columns = []
    for field in schema:
        column = table.column(field.name)
        if not column.type.equals(field.type):
            column = column.cast(field.type, safe=True)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=nullable(schema))


def nullable(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every field nullable, as delta-rs stores it (so schemas compare equal)."""
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)
