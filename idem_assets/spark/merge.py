"""Upsert on the natural key with Spark: rewrite exactly the partitions whose content changes.

Stored rows of the batch's partitions are read straight from the Parquet files delta-rs
lists for them (no Delta-Spark jars), ranked together with the batch in one window
(newest version, then content; an identical stored row beats the batch row), and only
partitions where a batch row wins are rewritten: remove + add actions in one commit.

With a delete marker, the batch's rows are events: a delete of its key takes part in the
ranking like an upsert (``survivor_order`` puts it first at one version), and so do the
deletes kept as tombstones beside the table (``lake.merge.Tombstones``), stored before
planning. A partition is rewritten where a batch upsert wins, or a delete wins over a
stored row; a winning delete is no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from idem_assets.lake.append import already_committed
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.dedupe import DELETE_FLAG
from idem_assets.lake.delta_log import removes, require_plain_table
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.staging import commit_staged, discarded_on_failure
from idem_assets.lake.stored import DataFile, data_files, file_location
from idem_assets.lake.tables import LakeTable, table_schema
from idem_assets.spark.commit import properties_for
from idem_assets.spark.merge_batch import MergeBatch, deduplicated_batch, event_batch
from idem_assets.spark.schema import col, spark_schema, spark_type
from idem_assets.spark.staging import spark_uri, stage
from idem_assets.spark.transforms import survivor_ordering

STRATEGY = "merge"
_SIDE = "__idem_side"
_RANK = "__idem_rank"
_HAD_STORED = "__idem_had_stored"
_PART = "__idem_partition"
_STORED_PART = "__idem_stored_partition"


@dataclass(frozen=True)
class _Plan:
    winners: DataFrame  # persisted: one row per key after ranking stored ∪ batch
    changed: list[object]  # partition values where a batch row (upsert or delete) wins
    inserts: int
    updates: int
    deletes: int  # stored rows a winning delete removes
    rows_rewritten: int

    @property
    def rows(self) -> DataFrame:
        """The winners that are rows: a winning delete is none."""
        if DELETE_FLAG in self.winners.columns:
            return self.winners.filter(~F.col(DELETE_FLAG))
        return self.winners


def _partition(partition_column: str | None) -> Column:
    return col(partition_column) if partition_column else F.lit(None)


def stored_rows(
    spark: SparkSession,
    table: DeltaTable,
    schema: pa.Schema,
    partition_column: str | None,
    files: Sequence[DataFile],
) -> DataFrame:
    """The stored rows of the given data files, read by executors (partition from the log)."""
    file_schema = pa.schema([f for f in schema if f.name != partition_column])
    by_value: dict[object, list[str]] = {}
    for data in files:
        location = spark_uri(file_location(table, data.path))
        by_value.setdefault(data.partition_value, []).append(location)
    frames = []
    for value, paths in by_value.items():
        frame = spark.read.schema(spark_schema(file_schema)).parquet(*paths)
        if partition_column:
            kind = spark_schema(schema)[partition_column].dataType
            frame = frame.withColumn(partition_column, F.lit(value).cast(kind))
        frames.append(frame.select(*(col(n) for n in schema.names)))
    result = spark.createDataFrame([], spark_schema(schema))
    for frame in frames:
        result = result.unionByName(frame)
    return result


def _plan(
    stored: DataFrame,
    batch: DataFrame,
    key: Sequence[str],
    version_column: str,
    partition_column: str | None,
) -> _Plan:
    columns = list(batch.columns)
    deletes = DELETE_FLAG in columns
    if deletes:
        stored = stored.withColumn(DELETE_FLAG, F.lit(False))
    combined = stored.withColumn(_SIDE, F.lit(0)).unionByName(batch.withColumn(_SIDE, F.lit(1)))
    by_key = Window.partitionBy(*(col(k) for k in key))
    ordered = by_key.orderBy(
        *survivor_ordering(columns, key, version_column, then_by=[F.col(_SIDE).asc()])
    )
    from_stored = F.col(_SIDE) == 0
    ranked = combined.withColumn(_RANK, F.row_number().over(ordered)).withColumn(
        _HAD_STORED, F.max(from_stored.cast("int")).over(by_key)
    )
    partition = _partition(partition_column)
    is_delete = F.col(DELETE_FLAG) if deletes else F.lit(False)
    if deletes and partition_column:
        # A winning delete changes the partition of the stored row it removes.
        ranked = ranked.withColumn(_STORED_PART, F.max(F.when(from_stored, partition)).over(by_key))
        partition = F.when(is_delete, F.col(_STORED_PART)).otherwise(partition)
    # Persisted: counted here, then range-sampled and written by the stage step.
    winners = ranked.filter(F.col(_RANK) == 1).persist(StorageLevel.MEMORY_AND_DISK)
    upsert = (F.col(_SIDE) == 1) & ~is_delete
    had_stored = F.col(_HAD_STORED) == 1
    try:
        per_partition = (
            winners.filter(~is_delete | had_stored)  # a delete of an absent key changes nothing
            .groupBy(partition.alias(_PART))
            .agg(
                F.sum((upsert & had_stored).cast("int")).alias("updates"),
                F.sum((upsert & ~had_stored).cast("int")).alias("inserts"),
                F.sum(is_delete.cast("int")).alias("deletes"),
                F.sum((~is_delete).cast("int")).alias("rows"),
            )
            .collect()
        )
    except BaseException:
        winners.unpersist()
        raise
    changed = [r for r in per_partition if r["updates"] or r["inserts"] or r["deletes"]]
    return _Plan(
        winners=winners,
        changed=[r[_PART] for r in changed],
        inserts=sum(r["inserts"] for r in changed),
        updates=sum(r["updates"] for r in changed),
        deletes=sum(r["deletes"] for r in changed),
        rows_rewritten=sum(r["rows"] for r in changed),
    )


def _with_tombstones(spark: SparkSession, batch: MergeBatch, key: Sequence[str]) -> DataFrame:
    """The batch's rows to rank now: with deletes, the tombstones kept for its keys (read
    again in each attempt) join them as deletes."""
    stones = batch.tombstones
    kept = stones.table.open() if stones is not None else None
    if stones is None or kept is None:
        return batch.rows
    names = [*key, stones.version_column]
    deletes = (
        stored_rows(spark, kept, table_schema(kept), None, data_files(kept, None))
        .select(*(col(n).cast(spark_type(batch.schema.field(n).type)).alias(n) for n in names))
        .join(batch.rows.select(*(col(k) for k in key)).distinct(), on=list(key), how="semi")
        .withColumn(DELETE_FLAG, F.lit(True))
    )
    return batch.rows.unionByName(deletes, allowMissingColumns=True)


def merge_partitions_spark(
    target: LakeTable,
    df: DataFrame,
    key: Sequence[str],
    version_column: str,
    partition_column: str | None,
    *,
    schema: pa.Schema,
    commit: Commit = DEFAULT_COMMIT,
    delete_column: tuple[str, object] | None = None,
) -> WriteResult:
    """Upsert ``df`` on ``key`` (newest ``version_column`` wins), rewriting changed partitions.

    The batch is deduplicated with the local engine's ordering. A rerun, or a batch whose
    rows are all stored or older, commits nothing. The partition of a key must not change
    between versions (it is derived from the key's identity, e.g. ``event_date``), as with
    the local merge's partition pruning. ``partition_column=None`` treats the whole table
    as one partition. ``commit.txn`` adds a Delta (app id, version) and skips the merge if
    that version is already committed.

    ``delete_column`` ``(column, marker)``: rows whose ``column`` equals ``marker`` delete
    their key, ordered by version like updates (at one version a delete wins), as the local
    ``merge_with_deletes`` does; ``column`` is read, never stored, and a delete row carries
    its key's partition value like an upsert. ``details["rows_deleted"]`` counts the rows
    removed.
    """
    if not version_column:
        raise ValueError("the Spark merge needs a version column to decide which row wins")
    spark = df.sparkSession
    batch = (
        event_batch(target, df, key, version_column, partition_column, schema, delete_column)
        if delete_column is not None
        else deduplicated_batch(df, key, version_column, partition_column, schema)
    )
    batch_fp, details, touched = batch.fingerprint, batch.details, batch.touched
    schema = batch.schema  # the table's: a delete marker is read, never stored
    txn = commit.txn
    properties = properties_for(commit, batch_fp)
    cluster_by = list(key)

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if already_committed(table, txn) is not None:
            return attempt.unchanged(batch_fp, proof=Proof.CONTENT, details=details)
        if table is None and delete_column is None:
            staged = stage(batch.rows, target, schema, partition_column, cluster_by)
            with discarded_on_failure(target, staged):
                commit_staged(target, None, staged, properties, schema=schema)
            return attempt.inserted(
                0, staged.rows, batch_fp, details={**details, "files_added": len(staged.files)}
            )
        files: list[DataFile] = []
        if table is None:
            # With deletes a first write is planned too: its own deletes (and kept ones) win.
            stored = spark.createDataFrame([], spark_schema(schema))
        else:
            require_plain_table(table, partition_column, schema)
            files = data_files(
                table, partition_column, (lambda v: v in touched) if touched is not None else None
            )
            stored = stored_rows(spark, table, schema, partition_column, files)
        plan = _plan(
            stored, _with_tombstones(spark, batch, key), key, version_column, partition_column
        )
        try:
            if not plan.changed and table is not None:
                return attempt.unchanged(batch_fp, proof=Proof.CONTENT, details=details)
            rewrite = plan.rows
            if partition_column:
                rewrite = rewrite.filter(_in(partition_column, plan.changed))
            staged = stage(
                rewrite.select(*schema.names), target, schema, partition_column, cluster_by
            )
        finally:
            plan.winners.unpersist()
        gone = removes(
            [f for f in files if not partition_column or f.partition_value in plan.changed],
            partition_column,
        )
        with discarded_on_failure(target, staged):
            version = commit_staged(
                target, table, staged, properties, schema=schema, removes=gone, change_key=key
            )
        deleted = {"rows_deleted": plan.deletes} if delete_column is not None else {}
        return attempt.written(
            version,
            plan.inserts + plan.updates + plan.deletes,
            batch_fp,
            rows_inserted=plan.inserts,
            rows_updated=plan.updates,
            rows_deleted=plan.deletes,
            details={
                **details,
                **deleted,
                "partitions_rewritten": len(plan.changed),
                "rows_rewritten": plan.rows_rewritten,
                "files_added": len(staged.files),
                "files_removed": len(gone),
            },
        )

    return commit_retried(target, STRATEGY, once)


def _in(partition_column: str, values: list[object]) -> Column:
    present = [v for v in values if v is not None]
    condition = col(partition_column).isin(present) if present else F.lit(False)
    if len(present) < len(values):
        condition = condition | col(partition_column).isNull()
    return condition
