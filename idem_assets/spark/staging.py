"""Executors write Parquet files into the table location; the driver collects only metadata.

A staged write is a folder ``<table>/spark-<id>/`` (``<partition>=<value>/part-….parquet``
inside it) written by Spark's own Parquet writer. Nothing in it is part of the table until
a Delta commit adds its files; ``discard`` deletes it when the commit is skipped or lost.
The driver lists the folder and reads each file's footer (size, rows, min/max/null counts
per column) to build Delta add actions: no row of data passes through it for that.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyspark import StatusTracker
from pyspark.sql import DataFrame, SparkSession

from idem_assets.lake.fingerprint import Fingerprint, fingerprint_batches
from idem_assets.lake.frames import conform
from idem_assets.lake.tables import LakeTable
from idem_assets.spark.schema import col, is_text

STAGING_PREFIX = "spark-"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Delta truncates string statistics; longer bounds are left out (always safe for pruning).
_MAX_STAT_CHARS = 64
_BATCH_ROWS = 65_536


def spark_uri(uri: str) -> str:
    """The table location as Spark's Hadoop filesystem spells it."""
    if "://" not in uri:
        return f"file://{os.path.abspath(uri)}"
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://"):]
    return uri


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The Arrow filesystem and base path of a table location (driver-side metadata reads)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file an executor wrote, as the Delta log will describe it."""

    path: str  # relative to the table root
    size: int
    rows: int
    partition_value: str | None
    stats: str  # Delta statistics JSON
    modification_time: int  # ms since the epoch


def _stat_value(value: object, kind: pa.DataType) -> object | None:
    """A footer min/max as Delta statistics JSON spells it (None: leave it out)."""
    if pa.types.is_integer(kind):
        return int(value)  # type: ignore[call-overload]
    if pa.types.is_decimal(kind) and isinstance(value, Decimal):
        as_float = float(value)
        return as_float if Decimal(repr(as_float)) == value else None
    if pa.types.is_date32(kind) and isinstance(value, dt.date):
        return value.isoformat()
    if pa.types.is_timestamp(kind) and isinstance(value, dt.datetime):
        # Delta keeps timestamp bounds in milliseconds, as delta-rs writes them.
        utc = value.astimezone(dt.UTC)
        return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"
    if is_text(kind) and isinstance(value, str):
        return value if len(value) <= _MAX_STAT_CHARS else None
    return None


def footer_stats(metadata: pq.FileMetaData, schema: pa.Schema) -> str:
    """Delta statistics (numRecords, minValues, maxValues, nullCount) from a Parquet footer."""
    low: dict[str, object] = {}
    high: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if name not in schema.names:
            continue
        kind = schema.field(name).type
        chunks = [metadata.row_group(g).column(index).statistics
                  for g in range(metadata.num_row_groups)]
        if chunks and all(s is not None and s.has_null_count for s in chunks):
            nulls[name] = sum(s.null_count for s in chunks)
        bounded = [s for s in chunks if s is not None and s.has_min_max]
        if bounded and len(bounded) == len(chunks):
            lowest = _stat_value(min(s.min for s in bounded), kind)
            highest = _stat_value(max(s.max for s in bounded), kind)
            if lowest is not None and highest is not None:
                low[name], high[name] = lowest, highest
    return json.dumps({"numRecords": metadata.num_rows, "minValues": low, "maxValues": high,
                       "nullCount": nulls}, separators=(",", ":"))


def typed_partition_value(text: str | None, kind: pa.DataType) -> object:
    """A partition value from its folder/log text, as a Python value of the column's type."""
    if text is None:
        return None
    if pa.types.is_date32(kind):
        return dt.date.fromisoformat(text)
    if pa.types.is_integer(kind):
        return int(text)
    raise TypeError(f"partition columns must be dates or integers, got {kind}")


@dataclass(frozen=True)
class StagedWrite:
    """Files staged under one folder of the table, not yet committed."""

    table_uri: str
    folder: str
    files: tuple[StagedFile, ...]
    partition_column: str | None

    @property
    def rows(self) -> int:
        """Rows in all staged files (from their footers)."""
        return sum(f.rows for f in self.files)

    def add_actions(self) -> list[AddAction]:
        """Delta add actions for every staged file (paths relative to the table root)."""
        column = self.partition_column
        return [AddAction(f.path, f.size, {column: f.partition_value} if column else {},
                          f.modification_time, True, f.stats) for f in self.files]

    def batches(self, schema: pa.Schema) -> Iterator[pa.Table]:
        """The staged rows, file by file in bounded batches, typed to ``schema``."""
        fs, base = filesystem(self.table_uri)
        column = self.partition_column
        for staged in self.files:
            with fs.open_input_file(f"{base}/{staged.path}") as handle:
                for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
                    table = pa.Table.from_batches([batch])
                    if column:
                        kind = schema.field(column).type
                        value = typed_partition_value(staged.partition_value, kind)
                        table = table.append_column(
                            column, pa.array([value] * table.num_rows, kind))
                    yield conform(table, schema)

    def fingerprint(self, schema: pa.Schema) -> Fingerprint:
        """Fingerprint of the staged rows, computed batch by batch in flat driver memory."""
        return fingerprint_batches(self.batches(schema))

    def discard(self) -> None:
        """Delete the staging folder (the files were never committed)."""
        remove_folder(self.table_uri, self.folder)


def remove_folder(table_uri: str, folder: str) -> None:
    """Delete ``<table>/<folder>`` and everything in it, if it exists."""
    fs, base = filesystem(table_uri)
    target = f"{base}/{folder}"
    if fs.get_file_info(target).type != pafs.FileType.NotFound:
        fs.delete_dir(target)


def _is_hidden(name: str) -> bool:
    # Hadoop's .crc checksums and a committer's _SUCCESS / _temporary are never data.
    return name.startswith((".", "_"))


def list_staged(table_uri: str, folder: str, schema: pa.Schema,
                partition_column: str | None) -> tuple[StagedFile, ...]:
    """Describe every data file under a staging folder from its footer."""
    fs, base = filesystem(table_uri)
    selector = pafs.FileSelector(f"{base}/{folder}", recursive=True, allow_not_found=True)
    files = []
    for info in fs.get_file_info(selector):
        relative = info.path[len(base) + 1:]
        if info.type != pafs.FileType.File or any(_is_hidden(p) for p in relative.split("/")):
            continue
        value = None
        if partition_column:
            segment = next((p for p in relative.split("/")[1:-1]
                            if p.startswith(f"{partition_column}=")), None)
            if segment is None:
                raise RuntimeError(f"staged file {relative} is outside a {partition_column}= "
                                   "folder")
            text = unquote(segment.split("=", 1)[1])
            value = None if text == NULL_PARTITION else text
        with fs.open_input_file(info.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns else int(time.time() * 1000)
        files.append(StagedFile(relative, info.size, metadata.num_rows, value,
                                footer_stats(metadata, schema), mtime))
    return tuple(sorted(files, key=lambda f: f.path))


def stage(df: DataFrame, target: LakeTable, schema: pa.Schema, partition_column: str | None,
          cluster_by: Sequence[str] = ()) -> StagedWrite:
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
        in_job_group(df.sparkSession, folder,
                     lambda: writer.parquet(f"{spark_uri(target.uri)}/{folder}"))
        files = list_staged(target.uri, folder, schema, partition_column)
    except BaseException:
        remove_folder(target.uri, folder)
        raise
    return StagedWrite(target.uri, folder, files, partition_column)


_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def in_job_group(spark: SparkSession, group: str, action: Callable[[], object],
                 timeout_s: float = 60.0) -> None:
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
