"""Committing staged Spark files through delta-rs, and reading a table's files directly.

Stored rows are read file by file with pyarrow from the paths in the Delta log (not with
``DeltaTable.to_pyarrow_dataset``, whose filesystem bridge can abort the interpreter at
exit), in bounded batches, so a fingerprint of a large slice needs flat driver memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema, Transaction
from deltalake.transaction import RemoveAction, create_table_with_add_actions
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.fingerprint import Fingerprint, fingerprint_batches
from idem_assets.lake.frames import conform
from idem_assets.lake.predicates import Range
from idem_assets.lake.result import WriteResult
from idem_assets.lake.tables import LakeTable, commit_properties, table_schema
from idem_assets.spark.staging import StagedWrite, filesystem

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)
_BATCH_ROWS = 65_536
# Table features that change neither how data files are read nor what a write must check.
_PLAIN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
_PLAIN_WRITER_FEATURES = _PLAIN_READER_FEATURES | {"appendOnly", "checkpointProtection"}


@dataclass(frozen=True)
class DataFile:
    """A file of the table's current version, as its add action describes it."""

    path: str  # relative to the table root (or absolute)
    size: int
    partition_value: object  # typed (e.g. a date); None when unpartitioned or null


def data_files(table: DeltaTable, partition_column: str | None,
               keep: Callable[[object], bool] | None = None) -> list[DataFile]:
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


def stored_batches(table: DeltaTable, partition_column: str | None,
                   keep: Callable[[object], bool] | None = None) -> Iterator[pa.Table]:
    """The stored rows of the kept partitions, in bounded batches typed to the table schema."""
    schema = table_schema(table)
    for data in data_files(table, partition_column, keep):
        fs, path = filesystem(file_location(table, data.path))
        with fs.open_input_file(path) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
                rows = pa.Table.from_batches([batch])
                if partition_column:
                    kind = schema.field(partition_column).type
                    rows = rows.append_column(
                        partition_column, pa.array([data.partition_value] * rows.num_rows, kind))
                yield conform(rows, schema)


def table_fingerprint(target: LakeTable) -> Fingerprint | None:
    """Fingerprint of a whole table (None if it does not exist), in flat memory."""
    table = target.open()
    if table is None:
        return None
    partitions = list(table.metadata().partition_columns)
    return fingerprint_batches(stored_batches(table, partitions[0] if partitions else None))


def slice_fingerprint(table: DeltaTable, condition: Range) -> Fingerprint:
    """Fingerprint of the stored rows of the partitions within ``condition``."""
    def keep(value: object) -> bool:
        return value is not None and condition.start <= value < condition.end  # type: ignore[operator]

    return fingerprint_batches(stored_batches(table, condition.column, keep))


def nullable(schema: pa.Schema) -> pa.Schema:
    """Every field nullable, as delta-rs stores them (so table schemas match the local engine)."""
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)


def require_plain_table(table: DeltaTable, partition_column: str | None,
                        schema: pa.Schema | None = None) -> None:
    """Refuse tables the staged files would not fit: features, constraints, layout, schema.

    Files are read and added as plain Parquet, and raw add actions are not checked against
    constraints, so tables needing more (column mapping, deletion vectors, CHECK
    constraints, generated or identity columns...) belong to a full Delta writer.
    """
    protocol = table.protocol()
    reader = set(protocol.reader_features or []) - _PLAIN_READER_FEATURES
    writer = set(protocol.writer_features or []) - _PLAIN_WRITER_FEATURES
    constraints = [k for k in table.metadata().configuration if k.startswith("delta.constraints.")]
    invariants = [f.name for f in table.schema().fields if "delta.invariants" in f.metadata]
    if (protocol.min_reader_version == 2 or 3 <= protocol.min_writer_version <= 6 or reader
            or writer or constraints or invariants):
        raise ValueError(
            f"{table.table_uri} needs Delta features the Spark engine does not apply "
            f"(protocol {protocol.min_reader_version}/{protocol.min_writer_version}, features "
            f"{sorted(reader | writer)}, constraints {constraints}, invariants {invariants}); "
            "write it with the local engine or Delta-Spark")
    partitions = list(table.metadata().partition_columns)
    expected = [partition_column] if partition_column else []
    if partitions != expected:
        raise ValueError(
            f"{table.table_uri} is partitioned by {partitions}, but this write lays files out "
            f"by {expected}; the Spark engine writes whole partitions of that column")
    if schema is None:
        return
    # Compared as Delta types, so Arrow spellings (string / large_string) do not matter.
    stored = [(f.name, f.type) for f in table.schema().fields]
    given = [(f.name, f.type) for f in Schema.from_arrow(nullable(schema)).fields]
    if given != stored:
        raise ValueError(
            f"{table.table_uri} has columns {stored} but the rows have {given}; the Spark "
            "engine writes files of the table's schema only (no schema evolution)")


def already_committed(table: DeltaTable | None, txn: Transaction | None) -> int | None:
    """The txn version recorded for ``txn.app_id`` when it covers ``txn.version``."""
    if table is None or txn is None:
        return None
    done = table.transaction_version(txn.app_id)
    return done if done is not None and done >= txn.version else None


def create_table(target: LakeTable, staged: StagedWrite, schema: pa.Schema,
                 properties: CommitProperties) -> None:
    """Create the table from staged files in one commit (mode="error": a racer makes it fail)."""
    create_table_with_add_actions(
        target.uri, Schema.from_arrow(nullable(schema)), staged.add_actions(), mode="error",
        partition_by=[staged.partition_column] if staged.partition_column else None,
        storage_options=target.options(), commit_properties=properties,
    )


def removes(files: Sequence[DataFile], partition_column: str | None) -> list[RemoveAction]:
    """Remove actions for the given files."""
    now = int(time.time() * 1000)
    return [RemoveAction(f.path, True, now, f.size,
                         {partition_column: None if f.partition_value is None
                          else str(f.partition_value)} if partition_column else {})
            for f in files]


def discard_unless_committed(target: LakeTable, staged: StagedWrite) -> None:
    """Delete a staged folder after a failure, unless a commit did take its files.

    A commit can succeed and still raise (a post-commit hook failing); deleting files the
    log now references would corrupt the table, so the log is checked first.
    """
    table = target.open()
    committed = {f.path for f in data_files(table, None)} if table is not None else set()
    if not {f.path for f in staged.files} & committed:
        staged.discard()


def committed_version(table: DeltaTable) -> int:
    """The version our commit on ``table``'s snapshot created.

    delta-rs retries are off, so a commit lands exactly one past the snapshot it was
    planned on, or fails; the DeltaTable object itself is not moved forward by it.
    """
    return table.version() + 1


def skipped(strategy: str, target: LakeTable, table: DeltaTable | None, fingerprint: Fingerprint,
            attempts: int, details: Mapping[str, Any]) -> WriteResult:
    """The result of a write that found nothing to commit."""
    version = table.version() if table is not None else -1
    return WriteResult(strategy, target.uri, version, False, 0, fingerprint, attempts=attempts,
                       details={"engine": "spark", **details})


def properties_for(metadata: Mapping[str, Any] | None, fingerprint: Fingerprint,
                   txn: Transaction | None) -> CommitProperties:
    """Commit properties: caller metadata, the fingerprint, the txn, delta-rs retries off."""
    return commit_properties({**(metadata or {}), "idem.fingerprint": str(fingerprint),
                              "idem.engine": "spark"}, [txn] if txn else [])
