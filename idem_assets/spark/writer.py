"""Scale-out writes: executors write Parquet into the table, delta-rs commits them at once.

Each function mirrors a lake strategy (``overwrite_partitions``, ``merge_upsert``,
``append_exactly_once``) and leaves a table with the same content fingerprint. The
driver handles only file metadata and a few counts; see docs/spark.md for the protocol.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
from deltalake import DeltaTable, Transaction
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from idem_assets.lake.append import already_committed
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.delta_log import require_plain_table
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.overwrite import PartitionMismatchError
from idem_assets.lake.predicates import Range, date_range
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.staging import StagedWrite, commit_staged, discarded_on_failure
from idem_assets.lake.stored import slice_fingerprint
from idem_assets.lake.tables import LakeTable
from idem_assets.spark.commit import SPARK_ERRORS, properties_for
from idem_assets.spark.fingerprint import spark_fingerprint
from idem_assets.spark.schema import col, conform_spark
from idem_assets.spark.staging import stage

_OUTSIDE = "idem: row outside the overwritten range"


def _replayed(
    strategy: str,
    target: LakeTable,
    table: DeltaTable | None,
    txn: Transaction | None,
    rows: DataFrame,
) -> WriteResult | None:
    """The result of a replay of a committed (app id, version), found before anything is
    staged; None when ``txn`` is not committed yet (the commit checks again)."""
    done = already_committed(table, txn)
    if done is None:
        return None
    assert table is not None, "a committed txn is in a table"
    return WriteResult.unchanged(
        strategy,
        target.uri,
        table.version(),
        spark_fingerprint(rows),
        proof=Proof.TXN,
        details={"engine": "spark", "txn_version": done},
    )


def _inside(rng: Range) -> Column:
    column = col(rng.column)
    return column.isNotNull() & (column >= F.lit(rng.start)) & (column < F.lit(rng.end))


def _refuse_outside(rows: DataFrame, rng: Range, error: BaseException | None) -> None:
    """Raise PartitionMismatchError with the count and a sample if rows lie outside ``rng``."""
    outside = rows.filter(~_inside(rng))
    bad = outside.count()
    if bad:
        sample = [r[0] for r in outside.select(col(rng.column)).limit(5).collect()]
        raise PartitionMismatchError(
            f"{bad} row(s) have {rng.column} not in [{rng.start}, {rng.end}), e.g. {sample}; "
            "nothing was written"
        ) from error


def _stage_within(
    rows: DataFrame, target: LakeTable, schema: pa.Schema, rng: Range, cluster_by: Sequence[str]
) -> StagedWrite:
    """Stage ``rows``; a row outside ``rng`` fails the Spark job before it is written."""
    checked = rows.withColumn(
        rng.column,
        F.when(_inside(rng), col(rng.column)).otherwise(
            F.raise_error(
                F.concat(F.lit(f"{_OUTSIDE} {rng.column}="), col(rng.column).cast("string"))
            )
        ),
    )
    try:
        return stage(checked, target, schema, rng.column, cluster_by)
    except SPARK_ERRORS as error:
        # The job failed: say why in our own terms if it was a row outside the range.
        _refuse_outside(rows, rng, error)
        raise


def overwrite_partitions_spark(
    target: LakeTable,
    df: DataFrame,
    partition_column: str,
    start: dt.date,
    end: dt.date,
    *,
    schema: pa.Schema,
    commit: Commit = DEFAULT_COMMIT,
    cluster_by: Sequence[str] = (),
) -> WriteResult:
    """Make date partitions ``[start, end)`` hold exactly ``df``, in one Delta commit.

    Executors write the files into the table location; a row outside the range fails
    the write before any commit. If the slice already holds the same content (fingerprints
    of the staged files and of the stored slice, both streamed in flat driver memory) the
    staged files are deleted and nothing is committed. ``commit.txn`` adds a Delta (app
    id, version) and skips the write if that version is already committed.
    """
    txn = commit.txn
    rng = date_range(partition_column, start, end)
    rows = conform_spark(df, schema)
    table = target.open()
    replay = _replayed("overwrite", target, table, txn, rows)
    if replay is not None:
        return replay
    if table is not None:
        require_plain_table(table, partition_column, schema)  # before any file is written
    staged = _stage_within(rows, target, schema, rng, cluster_by)
    new_fp = staged.fingerprint(schema)
    properties = properties_for(commit, new_fp)
    details = {"engine": "spark", "files_added": len(staged.files), "staging": staged.folder}

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if already_committed(table, txn) is not None or (
            table is not None and _unchanged(table, rng, new_fp)
        ):
            staged.discard()
            return attempt.unchanged(new_fp, proof=Proof.CONTENT, details={"engine": "spark"})
        version = commit_staged(
            target, table, staged, properties, schema=schema, replace_range=(start, end)
        )
        return attempt.inserted(version, staged.rows, new_fp, details=details)

    with discarded_on_failure(target, staged):
        return commit_retried(target, "overwrite", once)


def _unchanged(table: DeltaTable, rng: Range, new_fp: Fingerprint) -> bool:
    return slice_fingerprint(table, rng) == new_fp


def append_spark(
    target: LakeTable,
    df: DataFrame,
    app_id: str,
    version: int,
    *,
    schema: pa.Schema,
    partition_column: str | None = None,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Append ``df`` as batch ``version`` of ``app_id`` unless that version is committed.

    ``transaction_version(app_id)`` is read on a fresh snapshot before staging and again
    before committing; the commit carries the txn, so a replayed batch (a stream restarted
    after a crash) is skipped. An empty batch still commits, so the txn advances past it.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"txn version must be a non-negative int, got {version!r}")
    if not app_id:
        raise ValueError("app_id must not be empty")
    txn = Transaction(app_id=app_id, version=version)
    rows = conform_spark(df, schema)
    table = target.open()
    replay = _replayed("append", target, table, txn, rows)
    if replay is not None:
        return replay
    if table is not None:
        require_plain_table(table, partition_column, schema)  # before any file is written
    staged = stage(rows, target, schema, partition_column)
    batch_fp = staged.fingerprint(schema)
    properties = properties_for(commit, batch_fp, txn)

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        committed = already_committed(table, txn)
        if committed is not None:
            staged.discard()
            return attempt.unchanged(
                batch_fp, proof=Proof.TXN, details={"engine": "spark", "txn_version": committed}
            )
        if table is not None:
            require_plain_table(table, partition_column, schema)
        new_version = commit_staged(target, table, staged, properties, schema=schema)
        return attempt.inserted(
            new_version,
            staged.rows,
            batch_fp,
            details={"engine": "spark", "txn_version": version, "files_added": len(staged.files)},
        )

    with discarded_on_failure(target, staged):
        return commit_retried(target, "append", once)
