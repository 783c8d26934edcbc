"""Reading a table's stored rows file by file, and fingerprinting them in flat memory."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.lake.fingerprint import Fingerprint, fingerprint_batches
from idem_assets.lake.frames import conform
from idem_assets.lake.predicates import Range
from idem_assets.lake.tables import LakeTable, table_retries, table_schema
from idem_assets.transient import Retries, resuming

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pafs = lazy_module("pyarrow.fs")
    pq = lazy_module("pyarrow.parquet")


_BATCH_ROWS = 65_536


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The Arrow filesystem and base path of a table location (driver-side metadata reads)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path


def parquet_batches(
    fs: pafs.FileSystem,
    path: str,
    schema: pa.Schema,
    partition_column: str | None,
    partition_value: object,
    retries: Retries | None = None,
) -> Iterator[pa.Table]:
    """One Parquet data file's rows in bounded batches, typed to ``schema``.

    Data files do not hold their partition column; it is added from ``partition_value``
    (a typed value, as the Delta log or the staging folder names it).
    """

    def batches_from(count: int) -> Iterator[pa.RecordBatch]:
        with fs.open_input_file(path) as handle:
            reader = pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS)
            yield from itertools.islice(reader, count, None)

    # Data files are immutable: a read cut mid-body resumes after the batches it gave.
    for batch in resuming(batches_from, path, retries):
        rows = pa.Table.from_batches([batch])
        if partition_column:
            kind = schema.field(partition_column).type
            rows = rows.append_column(
                partition_column, pa.array([partition_value] * rows.num_rows, kind)
            )
        yield conform(rows, schema)


@dataclass(frozen=True)
class DataFile:
    """A file of the table's current version, as its add action describes it."""

    path: str  # relative to the table root (or absolute)
    size: int
    partition_value: object  # typed (e.g. a date); None when unpartitioned or null


def data_files(
    table: DeltaTable, partition_column: str | None, keep: Callable[[object], bool] | None = None
) -> list[DataFile]:
    """The table's data files, optionally only those whose partition value ``keep`` accepts."""
    out = []
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        value = action.get(f"partition.{partition_column}") if partition_column else None
        if keep is None or keep(value):
            out.append(DataFile(action["path"], action["size_bytes"], value))
    return out


def file_location(table: DeltaTable, path: str) -> str:
    """Where a data file of the table lives (log paths are relative to the table root)."""
    if "://" in path or path.startswith("/"):
        return path
    return f"{table.table_uri.rstrip('/')}/{path}"


def stored_batches(
    table: DeltaTable, partition_column: str | None, keep: Callable[[object], bool] | None = None
) -> Iterator[pa.Table]:
    """The stored rows of the kept partitions, in bounded batches typed to the table schema."""
    return file_batches(table, data_files(table, partition_column, keep), partition_column)


def file_batches(
    table: DeltaTable, files: Iterable[DataFile], partition_column: str | None
) -> Iterator[pa.Table]:
    """The rows of the given data files of ``table``, in bounded batches typed to its schema."""
    # Read with pyarrow from the paths in the Delta log, not with
    # DeltaTable.to_pyarrow_dataset, whose filesystem bridge can abort the interpreter at exit.
    schema = table_schema(table)
    for data in files:
        fs, path = filesystem(file_location(table, data.path))
        yield from parquet_batches(
            fs, path, schema, partition_column, data.partition_value, table_retries(table)
        )


def table_fingerprint(target: LakeTable, table: DeltaTable | None = None) -> Fingerprint | None:
    """Fingerprint of a whole table (None if it does not exist), in flat memory.

    ``table`` pins the snapshot to fingerprint; by default the newest version.
    """
    table = table if table is not None else target.open()
    if table is None:
        return None
    partitions = list(table.metadata().partition_columns)
    return fingerprint_batches(stored_batches(table, partitions[0] if partitions else None))


def slice_fingerprint(table: DeltaTable, condition: Range) -> Fingerprint:
    """Fingerprint of the stored rows of the partitions within ``condition``."""

    def keep(value: object) -> bool:
        return value is not None and condition.start <= value < condition.end  # type: ignore[operator]

    return fingerprint_batches(stored_batches(table, condition.column, keep))
