"""Spark Structured Streaming into Delta, exactly once: one txn-stamped commit per micro-batch.

The stream reads an append-only folder of JSON Lines files. ``foreachBatch`` judges each
micro-batch with the landing rules, stages its valid rows through the executor-side writer
and commits them with the Delta ``txn`` (stream app id, version = batch id). After a crash
Spark replays the last batch whose commit it had not checkpointed; ``append_spark`` reads
``transaction_version(app_id)`` on a fresh snapshot first and skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from idem_assets.lake.result import WriteResult
from idem_assets.lake.tables import LakeTable
from idem_assets.landing.contract import SourceContract
from idem_assets.spark.json_lines import json_lines
from idem_assets.spark.judge import BAD, PATH, RAW, REASON, ROW
from idem_assets.spark.resource import require_settings
from idem_assets.spark.schema import col
from idem_assets.spark.staging import spark_uri
from idem_assets.spark.writer import append_spark

STREAM_QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string()),
        pa.field("source_file", pa.string()),  # file name inside the stream folder
        pa.field("row_number", pa.int64()),  # null: a file source does not number lines
        pa.field("reason", pa.string()),
        pa.field("raw_record", pa.string()),
    ]
)


def with_dates_of_spark(rows: DataFrame, pairs: Sequence[tuple[str, str]]) -> DataFrame:
    """Add each ``(name, source)`` date column: the UTC day of timestamp column ``source``."""
    for name, source in pairs:
        rows = rows.withColumn(name, F.to_date(col(source)))
    return rows


@dataclass(frozen=True)
class StreamSink:
    """Where and how a stream's micro-batches are committed.

    ``contract`` judges the lines; ``prepare`` turns its valid rows into rows of the
    table ``schema`` (for example ``with_dates_of_spark`` for a date partition column).
    """

    target: LakeTable
    app_id: str
    contract: SourceContract
    schema: pa.Schema
    prepare: Callable[[DataFrame], DataFrame] | None = None
    partition_column: str | None = None
    # Rows failing the landing rules go here with a reason (txn app id "<app_id>/quarantine").
    quarantine: LakeTable | None = None
    # Test and operations hook, called after a batch's commits, before Spark checkpoints it.
    after_commit: Callable[[int, WriteResult], None] | None = None

    def commit(self, lines: DataFrame, batch_id: int) -> WriteResult:
        """Judge one micro-batch and commit it exactly once (the foreachBatch function)."""
        lines.persist()
        try:
            judged = json_lines(lines, self.contract)
            rows = judged.filter(~F.col(BAD)).select(*self.contract.columns)
            if self.prepare is not None:
                rows = self.prepare(rows)
            result = append_spark(
                self.target,
                rows,
                self.app_id,
                batch_id,
                schema=self.schema,
                partition_column=self.partition_column,
                commit_metadata={"idem.stream": self.app_id},
            )
            if self.quarantine is not None:
                rejected = judged.filter(F.col(BAD)).select(
                    F.lit(self.contract.name).alias("source"),
                    F.regexp_extract(F.col(PATH), r"([^/]+)$", 1).alias("source_file"),
                    F.col(ROW).alias("row_number"),
                    F.col(REASON).alias("reason"),
                    F.col(RAW).alias("raw_record"),
                )
                append_spark(
                    self.quarantine,
                    rejected,
                    f"{self.app_id}/quarantine",
                    batch_id,
                    schema=STREAM_QUARANTINE_SCHEMA,
                )
        finally:
            lines.unpersist()
        if self.after_commit is not None:
            self.after_commit(batch_id, result)
        return result


def start_stream(
    spark: SparkSession,
    stream_dir: str | Path,
    checkpoint_dir: str | Path,
    sink: StreamSink,
    *,
    max_files_per_trigger: int = 1,
    available_now: bool = True,
    processing_time: str | None = None,
) -> StreamingQuery:
    """Start a file-source stream over ``<stream_dir>/*.jsonl`` committing into ``sink``.

    ``available_now`` (the default) drains the files present and stops, which suits a
    scheduled Dagster run; pass ``processing_time`` (e.g. "30 seconds") to keep running.
    Hidden files (``.name``, ``_name``) are in-progress writes and are not read.
    """
    require_settings(spark)
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(f"{spark_uri(str(Path(stream_dir).resolve()))}/*.jsonl")
        .select(F.col("value"), F.col("_metadata.file_path").alias(PATH))
    )
    writer = (
        lines.writeStream.foreachBatch(sink.commit)
        .option("checkpointLocation", spark_uri(str(Path(checkpoint_dir).resolve())))
        .queryName(sink.app_id.replace("/", "_"))
    )
    if processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    elif available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()
