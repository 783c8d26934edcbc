"""Spark Structured Streaming into Delta, exactly once: one txn-stamped commit per micro-batch.

The stream reads an append-only folder of JSON Lines files (Spark's file source tracks
which files each micro-batch holds). ``foreachBatch`` reads each file of a micro-batch on
the executors with the library's own landing reader (``FileReader``, as the batch engines
do), stages its valid rows through the executor-side writer and commits them with the
Delta ``txn`` (stream app id, version = batch id). After a crash
Spark replays the last batch whose commit it had not checkpointed; ``append_spark`` reads
``transaction_version(app_id)`` on a fresh snapshot first and skips it. A sink declaring
``erasable_keys`` reads the erasure ledger at each micro-batch and leaves its keys out, as
every other write does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StreamingQuery

from idem_assets.checkpoint import open_store
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake.commits import Commit
from idem_assets.lake.erasure import Erased
from idem_assets.lake.result import WriteResult
from idem_assets.lake.tables import LakeTable
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.erasure import QuarantineWithoutErased
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.reader import FileReader
from idem_assets.spark.erasure import without_erased_spark
from idem_assets.spark.landing import (
    ERROR,
    FILE_PREFIX,
    KIND,
    QUARANTINE_PREFIX,
    QUARANTINED,
    ROW,
    Records,
    judged_schema,
    read_one,
)
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


# Spark's binaryFile source, which a stream must be given up front.
BINARY_FILE_SCHEMA = T.StructType(
    [
        T.StructField("path", T.StringType(), False),
        T.StructField("modificationTime", T.TimestampType(), False),
        T.StructField("length", T.LongType(), False),
        T.StructField("content", T.BinaryType(), True),
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
    # Columns that identify a person: keys ``idem-assets erase`` recorded in the ledger of
    # the checkpoint store at ``erasures_url`` are left out of every micro-batch.
    erasable_keys: tuple[str, ...] = ()
    erasures_url: str | None = None

    def __post_init__(self) -> None:
        if self.erasable_keys and self.erasures_url is None:
            raise ValueError(
                "a StreamSink with erasable_keys needs erasures_url: the checkpoint store "
                "whose erasure ledger `idem-assets erase` writes"
            )

    def erased(self) -> Erased:
        """The erased keys of ``erasable_keys``, as the ledger holds them now."""
        if not self.erasable_keys or self.erasures_url is None:
            return Erased()
        with open_store(self.erasures_url) as store:
            return ErasureLedger(store).erased(self.erasable_keys)

    def commit(self, files: DataFrame, batch_id: int) -> WriteResult:
        """Read one micro-batch's files and commit it exactly once (the foreachBatch function)."""
        judged = files.mapInArrow(ParseFiles(self.contract), judged_schema(self.contract))
        judged.persist()
        try:
            failed = (
                judged.filter(F.col(KIND) == ERROR)
                .select(F.col(FILE_PREFIX + "relpath"), F.col(FILE_PREFIX + "error"))
                .first()
            )
            if failed is not None:
                raise LandingFileError(failed[0], failed[1])
            rows = judged.filter(F.col(KIND) == ROW).select(
                *(col(c) for c in self.contract.columns)
            )
            if self.prepare is not None:
                rows = self.prepare(rows)
            # Read at each micro-batch: a key erased while the stream runs is left out of
            # the next batch (a replayed batch committed before the erase is skipped).
            erased = self.erased()
            rows = without_erased_spark(rows, erased)
            result = append_spark(
                self.target,
                rows,
                self.app_id,
                batch_id,
                schema=self.schema,
                partition_column=self.partition_column,
                commit=Commit({"idem.stream": self.app_id}),
            )
            if self.quarantine is not None:
                rejected = judged.filter(F.col(KIND) == QUARANTINED).select(
                    F.lit(self.contract.name).alias("source"),
                    *(
                        F.col(QUARANTINE_PREFIX + name).alias(name)
                        for name in ("source_file", "row_number", "reason", "raw_record")
                    ),
                )
                if erased:
                    held_out = QuarantineWithoutErased(
                        erased, {self.contract.name: self.erasable_keys}
                    )
                    rejected = rejected.mapInArrow(held_out, rejected.schema)
                append_spark(
                    self.quarantine,
                    rejected,
                    f"{self.app_id}/quarantine",
                    batch_id,
                    schema=STREAM_QUARANTINE_SCHEMA,
                )
        finally:
            judged.unpersist()
        if self.after_commit is not None:
            self.after_commit(batch_id, result)
        return result


@dataclass(frozen=True)
class ParseFiles:
    """The task function of a micro-batch: each file's bytes read by ``FileReader``."""

    contract: SourceContract

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        records = Records(self.contract)
        for batch in batches:
            for entry in batch.to_pylist():
                name = entry["path"].rsplit("/", 1)[-1]
                content = entry["content"]
                reader = FileReader([content], name, self.contract, None, len(content))
                yield from read_one(reader, records)


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
    files = (
        spark.readStream.format("binaryFile")
        .schema(BINARY_FILE_SCHEMA)
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .option("pathGlobFilter", "*.jsonl")
        .load(spark_uri(str(Path(stream_dir).resolve())))
        .select(F.col("path"), F.col("content"))
    )
    writer = (
        files.writeStream.foreachBatch(sink.commit)
        .option("checkpointLocation", spark_uri(str(Path(checkpoint_dir).resolve())))
        .queryName(sink.app_id.replace("/", "_"))
    )
    if processing_time is not None:
        writer = writer.trigger(processingTime=processing_time)
    elif available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()
