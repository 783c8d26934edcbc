"""Committing staged Spark files through delta-rs: one Delta transaction per logical write."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema, Transaction
from deltalake.transaction import RemoveAction, create_table_with_add_actions
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.fingerprint import Fingerprint, fingerprint_batches
from idem_assets.lake.predicates import Range
from idem_assets.lake.result import WriteResult
from idem_assets.lake.tables import LakeTable, commit_properties, range_filter
from idem_assets.spark.staging import StagedWrite

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)
_BATCH_ROWS = 65_536


def nullable(schema: pa.Schema) -> pa.Schema:
    """Every field nullable, as delta-rs stores them (so table schemas match the local engine)."""
    return pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)


def require_plain_table(table: DeltaTable, partition_column: str | None) -> None:
    """Refuse tables whose files cannot be read and rewritten as plain Parquet."""
    protocol = table.protocol()
    features = sorted(protocol.reader_features or [])
    if protocol.min_reader_version > 1 and features:
        raise ValueError(
            f"{table.table_uri} uses Delta reader features {features}; the Spark engine reads "
            "data files directly and supports only tables without them (use Delta-Spark)")
    partitions = list(table.metadata().partition_columns)
    expected = [partition_column] if partition_column else []
    if partitions != expected:
        raise ValueError(
            f"{table.table_uri} is partitioned by {partitions}, but this write lays files out "
            f"by {expected}; the Spark engine writes whole partitions of that column")


def already_committed(table: DeltaTable | None, txn: Transaction | None) -> int | None:
    """The txn version recorded for ``txn.app_id`` when it covers ``txn.version``."""
    if table is None or txn is None:
        return None
    done = table.transaction_version(txn.app_id)
    return done if done is not None and done >= txn.version else None


def slice_fingerprint(table: DeltaTable, condition: Range) -> Fingerprint:
    """Fingerprint of the stored rows within ``condition``, streamed in flat memory."""
    dataset = table.to_pyarrow_dataset()
    scanner = dataset.scanner(filter=range_filter(condition), batch_size=_BATCH_ROWS,
                              batch_readahead=1, fragment_readahead=1)
    return fingerprint_batches(pa.Table.from_batches([b]) for b in scanner.to_batches())


def create_table(target: LakeTable, staged: StagedWrite, schema: pa.Schema,
                 properties: Any) -> None:
    """Create the table from staged files in one commit (mode="error": a racer makes it fail)."""
    create_table_with_add_actions(
        target.uri, Schema.from_arrow(nullable(schema)), staged.add_actions(), mode="error",
        partition_by=[staged.partition_column] if staged.partition_column else None,
        storage_options=target.options(), commit_properties=properties,
    )


def removes(table: DeltaTable, partition_column: str | None,
            values: Sequence[object] | None) -> list[RemoveAction]:
    """Remove actions for every file of the given partition values (all files if None)."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    out = []
    for action in actions:
        value = action.get(f"partition.{partition_column}") if partition_column else None
        if values is not None and value not in values:
            continue
        text = None if value is None else str(value)
        out.append(RemoveAction(action["path"], True, now, action["size_bytes"],
                                {partition_column: text} if partition_column else {}))
    return out


def files_of(table: DeltaTable, partition_column: str | None,
             values: Sequence[object] | None) -> dict[object, list[str]]:
    """Relative data file paths per partition value (one None key when unpartitioned)."""
    grouped: dict[object, list[str]] = {}
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        value = action.get(f"partition.{partition_column}") if partition_column else None
        if values is None or value in values:
            grouped.setdefault(value, []).append(action["path"])
    return grouped


def committed_paths(target: LakeTable) -> set[str]:
    """Relative paths of the data files in the table's newest version."""
    table = target.open()
    return set(table.files()) if table is not None else set()


def discard_unless_committed(target: LakeTable, staged: StagedWrite) -> None:
    """Delete a staged folder after a failure, unless a commit did take its files.

    A commit can succeed and still raise (a post-commit hook failing); deleting files the
    log now references would corrupt the table, so the log is checked first.
    """
    if not staged.files or not {f.path for f in staged.files} & committed_paths(target):
        staged.discard()


def skipped(strategy: str, target: LakeTable, table: DeltaTable | None, fingerprint: Fingerprint,
            attempts: int, details: Mapping[str, Any]) -> WriteResult:
    """The result of a write that found nothing to commit."""
    version = table.version() if table is not None else -1
    return WriteResult(strategy, target.uri, version, False, 0, fingerprint, attempts=attempts,
                       details={"engine": "spark", **details})


def properties_for(metadata: Mapping[str, Any] | None, fingerprint: Fingerprint,
                   txn: Transaction | None) -> Any:
    """Commit properties: caller metadata, the fingerprint, the txn, delta-rs retries off."""
    return commit_properties({**(metadata or {}), "idem.fingerprint": str(fingerprint),
                              "idem.engine": "spark"}, [txn] if txn else [])
