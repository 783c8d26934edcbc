"""Executors write Parquet files into the table location; the driver collects only metadata.

A Spark staged write is a folder ``<table>/spark-<id>/`` written by Spark's own Parquet
writer; the driver lists it and reads each file's footer to build Delta add actions (see
``lake.staging``), so no row of data passes through it for that.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence

import pyarrow as pa
from pyspark import StatusTracker
from pyspark.sql import DataFrame, SparkSession

from idem_assets.lake.staging import StagedWrite, list_staged, remove_folder
from idem_assets.lake.tables import LakeTable
from idem_assets.spark.schema import col

__all__ = ["STAGING_PREFIX", "in_job_group", "spark_uri", "stage"]

STAGING_PREFIX = "spark-"


def spark_uri(uri: str) -> str:
    """The table location as Spark's Hadoop filesystem spells it."""
    if "://" not in uri:
        return f"file://{os.path.abspath(uri)}"
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri


def stage(
    df: DataFrame,
    target: LakeTable,
    schema: pa.Schema,
    partition_column: str | None,
    cluster_by: Sequence[str] = (),
) -> StagedWrite:
    """Write ``df`` (already cast to ``schema``) as Parquet files under a new staging folder.

    Rows are range-partitioned by (partition column, ``cluster_by``) so each task writes
    contiguous, non-overlapping files whose min/max statistics stay tight for pruning.
    """
    folder = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    order = [c for c in (partition_column, *cluster_by) if c]
    laid_out = df.repartitionByRange(*(col(c) for c in order)) if order else df
    if order:
        laid_out = laid_out.sortWithinPartitions(*(col(c) for c in order))
    writer = laid_out.write.mode("errorifexists").option("compression", "snappy")
    if partition_column:
        writer = writer.partitionBy(partition_column)
    try:
        in_job_group(
            df.sparkSession, folder, lambda: writer.parquet(f"{spark_uri(target.uri)}/{folder}")
        )
        files = list_staged(target.uri, folder, schema, partition_column)
    except BaseException:
        remove_folder(target.uri, folder)
        raise
    return StagedWrite(target.uri, folder, files, partition_column)


_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def in_job_group(
    spark: SparkSession, group: str, action: Callable[[], object], timeout_s: float = 60.0
) -> None:
    """Run a Spark action in its own job group; on failure wait until its tasks are gone.

    When one task fails, Spark fails the job while sibling tasks may still be writing;
    deleting the staging folder before they stop would leave their files behind.
    """
    context = spark.sparkContext
    previous = {key: context.getLocalProperty(key) for key in _GROUP_PROPERTIES}
    context.setJobGroup(group, "idem_assets staged write", interruptOnCancel=True)
    try:
        action()
    except BaseException:
        context.cancelJobGroup(group)
        tracker = context.statusTracker()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _active_tasks(tracker, group):
            time.sleep(0.05)
        raise
    finally:
        for key, value in previous.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]


def _active_tasks(tracker: StatusTracker, group: str) -> int:
    active = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            info = tracker.getStageInfo(stage_id)
            active += info.numActiveTasks if info else 0
    return active
