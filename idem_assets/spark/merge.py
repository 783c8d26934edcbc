"""Upsert on the natural key with Spark: rewrite exactly the partitions whose content changes.

Stored rows of the batch's partitions are read straight from the Parquet files delta-rs
lists for them (no Delta-Spark jars), ranked together with the batch in one window
(newest version, then content; an identical stored row beats the batch row), and only
partitions where a batch row wins are rewritten: remove + add actions in one commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Transaction
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from idem_assets.lake.append import already_committed
from idem_assets.lake.delta_log import removes, require_plain_table
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.staging import commit_staged, discard_unless_committed
from idem_assets.lake.stored import DataFile, data_files, file_location
from idem_assets.lake.tables import LakeTable, with_commit_retries
from idem_assets.spark.commit import properties_for
from idem_assets.spark.schema import col, conform_spark, spark_schema
from idem_assets.spark.staging import spark_uri, stage
from idem_assets.spark.transforms import dedupe_newest_spark, survivor, survivor_ordering

STRATEGY = "merge"
_SIDE = "__idem_side"
_RANK = "__idem_rank"
_HAD_STORED = "__idem_had_stored"
_PART = "__idem_partition"


@dataclass(frozen=True)
class _Plan:
    winners: DataFrame  # persisted: one row per key after ranking stored ∪ batch
    changed: list[object]  # partition values where a batch row wins
    inserts: int
    updates: int
    rows_rewritten: int


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
    combined = stored.withColumn(_SIDE, F.lit(0)).unionByName(batch.withColumn(_SIDE, F.lit(1)))
    by_key = Window.partitionBy(*(col(k) for k in key))
    ordered = by_key.orderBy(
        *survivor_ordering(columns, key, version_column, then_by=[F.col(_SIDE).asc()])
    )
    ranked = combined.withColumn(_RANK, F.row_number().over(ordered)).withColumn(
        _HAD_STORED, F.max((F.col(_SIDE) == 0).cast("int")).over(by_key)
    )
    # Persisted: counted here, then range-sampled and written by the stage step.
    winners = ranked.filter(F.col(_RANK) == 1).persist(StorageLevel.MEMORY_AND_DISK)
    from_batch = F.col(_SIDE) == 1
    try:
        per_partition = (
            winners.groupBy(_partition(partition_column).alias(_PART))
            .agg(
                F.sum((from_batch & (F.col(_HAD_STORED) == 1)).cast("int")).alias("updates"),
                F.sum((from_batch & (F.col(_HAD_STORED) == 0)).cast("int")).alias("inserts"),
                F.count(F.lit(1)).alias("rows"),
            )
            .collect()
        )
    except BaseException:
        winners.unpersist()
        raise
    changed = [r for r in per_partition if r["updates"] or r["inserts"]]
    return _Plan(
        winners=winners,
        changed=[r[_PART] for r in changed],
        inserts=sum(r["inserts"] for r in changed),
        updates=sum(r["updates"] for r in changed),
        rows_rewritten=sum(r["rows"] for r in changed),
    )


def merge_partitions_spark(
    target: LakeTable,
    df: DataFrame,
    key: Sequence[str],
    version_column: str,
    partition_column: str | None,
    *,
    schema: pa.Schema,
    commit_metadata: Mapping[str, Any] | None = None,
    txn: Transaction | None = None,
) -> WriteResult:
    """Upsert ``df`` on ``key`` (newest ``version_column`` wins), rewriting changed partitions.

    The batch is deduplicated with the local engine's ordering. A rerun, or a batch whose
    rows are all stored or older, commits nothing. The partition of a key must not change
    between versions (it is derived from the key's identity, e.g. ``event_date``), as with
    the local merge's partition pruning. ``partition_column=None`` treats the whole table
    as one partition.
    """
    if not version_column:
        raise ValueError("the Spark merge needs a version column to decide which row wins")
    spark = df.sparkSession
    extra: dict[str, Column] = {}
    if partition_column:
        # The batch's partitions come out of the dedupe's own job (collect_set skips nulls).
        value = col(partition_column)
        extra = {
            "values": F.collect_set(F.when(survivor(), value)),
            "null": F.max(survivor() & value.isNull()),
        }
    deduped = dedupe_newest_spark(
        conform_spark(df, schema), key, version_column, fingerprint=True, extra_aggregates=extra
    )
    batch = deduped.rows
    assert deduped.fingerprint is not None and deduped.extra is not None
    batch_fp = deduped.fingerprint
    details = {
        "engine": "spark",
        "duplicates_dropped": deduped.duplicates_dropped,
        "conflicting_keys": deduped.conflicting_keys,
    }
    properties = properties_for(commit_metadata, batch_fp, txn)
    touched = (
        [*deduped.extra["values"], *([None] if deduped.extra["null"] else [])]
        if partition_column
        else None
    )
    cluster_by = list(key)

    def attempt(number: int) -> WriteResult:
        table = target.open()
        if already_committed(table, txn) is not None:
            return WriteResult.unchanged(
                STRATEGY,
                target.uri,
                table.version(),
                batch_fp,
                proof=Proof.CONTENT,
                attempts=number + 1,
                details=details,
            )
        if table is None:
            staged = stage(batch, target, schema, partition_column, cluster_by)
            try:
                commit_staged(target, None, staged, properties, schema=schema)
            except BaseException:
                discard_unless_committed(target, staged)
                raise
            return WriteResult.written(
                STRATEGY,
                target.uri,
                0,
                staged.rows,
                batch_fp,
                rows_inserted=staged.rows,
                attempts=number + 1,
                details={**details, "files_added": len(staged.files)},
            )
        require_plain_table(table, partition_column, schema)
        files = data_files(
            table, partition_column, (lambda v: v in touched) if touched is not None else None
        )
        stored = stored_rows(spark, table, schema, partition_column, files)
        plan = _plan(stored, batch, key, version_column, partition_column)
        try:
            if not plan.changed:
                return WriteResult.unchanged(
                    STRATEGY,
                    target.uri,
                    table.version(),
                    batch_fp,
                    proof=Proof.CONTENT,
                    attempts=number + 1,
                    details=details,
                )
            rewrite = plan.winners
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
        try:
            version = commit_staged(
                target, table, staged, properties, schema=schema, removes=gone, change_key=key
            )
        except BaseException:
            discard_unless_committed(target, staged)
            raise
        return WriteResult.written(
            STRATEGY,
            target.uri,
            version,
            plan.inserts + plan.updates,
            batch_fp,
            rows_inserted=plan.inserts,
            rows_updated=plan.updates,
            attempts=number + 1,
            details={
                **details,
                "partitions_rewritten": len(plan.changed),
                "rows_rewritten": plan.rows_rewritten,
                "files_added": len(staged.files),
                "files_removed": len(gone),
            },
        )

    return with_commit_retries(attempt)


def _in(partition_column: str, values: list[object]) -> Column:
    present = [v for v in values if v is not None]
    condition = col(partition_column).isin(present) if present else F.lit(False)
    if len(present) < len(values):
        condition = condition | col(partition_column).isNull()
    return condition
