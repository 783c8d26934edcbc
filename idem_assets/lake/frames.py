"""Conversions between the frame types the lake accepts (Arrow, Polars, pandas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from idem_assets._lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


if TYPE_CHECKING:
    import polars as pl

    FrameLike: TypeAlias = pa.Table | pl.DataFrame | Any
else:
    pl = lazy_module("polars")  # imported on first use: see idem_assets._lazy
    # For annotations only; spelling out pl.DataFrame here would import polars.
    FrameLike = Any


WRITABLE = (
    "pyarrow.Table",
    "pyarrow.RecordBatchReader",
    "polars.DataFrame",
    "polars.LazyFrame",
    "pandas.DataFrame",
)
READABLE = (
    "pyarrow.Table",
    "pyarrow.RecordBatchReader",
    "polars.DataFrame",
    "polars.LazyFrame",
    "pandas.DataFrame",
)


class UnsupportedFrameError(TypeError):
    """An object of a type the lake cannot write or hand out; the message lists the types."""


def is_writable(data: object) -> bool:
    """Whether ``data`` is a frame type the lake writes."""
    return (
        isinstance(
            data, pa.Table | pa.RecordBatch | pa.RecordBatchReader | pl.DataFrame | pl.LazyFrame
        )
        or type(data).__module__.startswith("pandas")
        or hasattr(data, "__arrow_c_stream__")
    )


def unsupported(kind: type, what: str = "write") -> UnsupportedFrameError:
    """The error for an unsupported type, naming it and the supported ones."""
    name = (
        f"{kind.__module__}.{kind.__qualname__}"
        if kind.__module__ != "builtins"
        else (kind.__qualname__)
    )
    supported = WRITABLE if what == "write" else READABLE
    return UnsupportedFrameError(
        f"cannot {what} a {name}: supported types are {', '.join(supported)}"
    )


def to_arrow(data: FrameLike) -> pa.Table:
    """Any supported frame as a ``pyarrow.Table`` (no copy where possible)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, pl.LazyFrame):
        return data.collect().to_arrow()
    if isinstance(data, pl.DataFrame):
        return data.to_arrow()
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise unsupported(type(data))


def as_type(table: pa.Table, kind: Any) -> Any:
    """A table handed out as ``kind`` (an input's annotation; Any or None: pyarrow.Table)."""
    if kind in (None, Any, object, pa.Table):
        return table
    if kind is pa.RecordBatchReader:
        return table.to_reader()
    if kind is pl.DataFrame:
        return pl.from_arrow(table)
    if kind is pl.LazyFrame:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame.lazy()
    if (
        getattr(kind, "__module__", "").startswith("pandas")
        and getattr(kind, "__name__", "") == "DataFrame"
    ):
        return table.to_pandas()
    raise unsupported(kind, "load")


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


def is_text(kind: pa.DataType) -> bool:
    """Whether an Arrow type is one of the string spellings (string, large, view)."""
    return (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )
