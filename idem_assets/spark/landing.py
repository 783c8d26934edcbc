"""Reading landing files with Spark: every executor runs the library's own landing reader.

The driver lists the window (the same listing the local engine signs) and hands out the
files, one task each. A task reads its file with ``FileReader`` (``mapInArrow``): the
same code, piece by piece, that the local engine runs, so every row is typed, judged and
quarantined with the same reason, row and line number on both engines: parity by
construction. Out come Arrow batches of typed rows, of quarantine rows and one summary
per file; Spark keeps what it is for: scheduling, deduplication windows, staging Parquet.
Executor memory is bounded by a piece of a file (``PIECE_BYTES``), not by the file.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from idem_assets.faults import crash_point
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.files import Discovery, Landing, LandingFile, discover_days
from idem_assets.landing.pieces import PIECE_BYTES
from idem_assets.landing.reader import FileReader, window_days
from idem_assets.landing.store import LandingObject, LandingRoot, landing_root
from idem_assets.spark.resource import require_settings
from idem_assets.spark.schema import col, spark_schema

KIND = "__idem_kind"
ROW, QUARANTINED, FILE, ERROR = "row", "quarantine", "file", "error"
QUARANTINE_PREFIX = "__idem_q_"  # quarantine columns
FILE_PREFIX = "__idem_f_"  # per-file summary columns
QUARANTINE_FIELDS = (
    ("partition_date", T.DateType()),
    ("source_file", T.StringType()),
    ("row_number", T.LongType()),
    ("reason", T.StringType()),
    ("raw_record", T.StringType()),
)
FILE_FIELDS = (
    ("relpath", T.StringType()),
    ("format", T.StringType()),
    ("day", T.DateType()),
    ("size", T.LongType()),
    ("sha256", T.StringType()),
    ("rows", T.LongType()),
    ("valid", T.LongType()),
    ("quarantined", T.LongType()),
    ("dropped", T.StringType()),  # JSON list
    ("notes", T.StringType()),  # JSON list
    ("nulls", T.StringType()),  # JSON {column: {null spelling: count}}
    ("error", T.StringType()),
)
# What a task is given: one listed file.
ENTRY_SCHEMA = T.StructType(
    [
        T.StructField("relpath", T.StringType()),
        T.StructField("size", T.LongType()),
        T.StructField("stamp", T.StringType()),  # JSON of the listing's stamp
        T.StructField("modified_ns", T.LongType()),
        T.StructField("day", T.DateType()),
    ]
)


def judged_schema(contract: SourceContract) -> T.StructType:
    """One schema for every record a task yields: its kind, the contract columns (typed
    rows), the quarantine columns and the per-file summary columns; unused ones are null."""
    fields = [T.StructField(KIND, T.StringType(), False), *spark_schema(contract.schema).fields]
    fields += [T.StructField(QUARANTINE_PREFIX + name, kind) for name, kind in QUARANTINE_FIELDS]
    fields += [T.StructField(FILE_PREFIX + name, kind) for name, kind in FILE_FIELDS]
    return T.StructType(fields)


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    """Spark's Arrow schema with timestamps in UTC: pyspark 4.2 renamed 4.1's
    ``timestamp_utc=True`` to ``timezone="UTC"`` (the same Arrow type)."""
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema, timestamp_utc=True)  # type: ignore[call-arg]


class Records:
    """Arrow record batches in the judged schema, from the reader's tables."""

    def __init__(self, contract: SourceContract) -> None:
        self.contract = contract
        self.schema = _arrow_schema(judged_schema(contract))

    def batch(self, kind: str, columns: Mapping[str, pa.Array], rows: int) -> pa.RecordBatch:
        arrays = []
        for target in self.schema:
            if target.name == KIND:
                arrays.append(pa.array([kind] * rows, target.type))
            elif target.name in columns:
                arrays.append(columns[target.name].cast(target.type))
            else:
                arrays.append(pa.nulls(rows, target.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def rows(self, table: pa.Table) -> pa.RecordBatch:
        columns = {name: table.column(name).combine_chunks() for name in table.column_names}
        return self.batch(ROW, columns, table.num_rows)

    def quarantine(self, table: pa.Table) -> pa.RecordBatch:
        columns = {
            QUARANTINE_PREFIX + name: table.column(name).combine_chunks()
            for name, _ in QUARANTINE_FIELDS
        }
        return self.batch(QUARANTINED, columns, table.num_rows)

    def summary(self, values: Mapping[str, Any], kind: str = FILE) -> pa.RecordBatch:
        columns = {
            FILE_PREFIX + name: pa.array(
                [values.get(name)], self.schema.field(FILE_PREFIX + name).type
            )
            for name, _ in FILE_FIELDS
        }
        return self.batch(kind, columns, 1)


@dataclass(frozen=True)
class ReadFiles:
    """The task function: read each listed file of its partition with ``FileReader``."""

    root: LandingRoot
    contract: SourceContract
    piece_bytes: int = PIECE_BYTES

    def __call__(self, entries: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        records = Records(self.contract)
        for batch in entries:
            for entry in batch.to_pylist():
                crash_point("spark.read_file")  # fault injection for the cluster tests
                item = LandingObject(
                    entry["relpath"],
                    entry["size"],
                    tuple(json.loads(entry["stamp"])),
                    entry["modified_ns"],
                )
                yield from read_one(
                    FileReader(
                        self.root.chunks(item),
                        item.relpath,
                        self.contract,
                        entry["day"],
                        item.size,
                        self.piece_bytes,
                    ),
                    records,
                )


def read_one(reader: FileReader, records: Records) -> Iterator[pa.RecordBatch]:
    """One file's records: its pieces' rows and quarantine rows, then its summary (or an
    error record naming the file, which the driver raises)."""
    valid = quarantined = 0
    try:
        for piece in reader:
            if piece.rows.num_rows:
                valid += piece.rows.num_rows
                yield records.rows(piece.rows)
            if piece.quarantine.num_rows:
                quarantined += piece.quarantine.num_rows
                yield records.quarantine(piece.quarantine)
    except LandingFileError as exc:
        yield records.summary({"relpath": exc.relpath, "error": exc.problem}, ERROR)
        return
    read = reader.file
    yield records.summary(
        {
            "relpath": read.relpath,
            "format": read.format,
            "day": read.day,
            "size": read.size,
            "sha256": read.sha256,
            "rows": read.rows,
            "valid": valid,
            "quarantined": quarantined,
            "dropped": json.dumps(list(reader.dropped_columns)),
            "notes": json.dumps(list(reader.notes)),
            "nulls": json.dumps(reader.null_spellings),
        }
    )


@dataclass(frozen=True)
class SparkLandingBatch:
    """A source's days read by Spark: lazy views of the typed rows and quarantine rows of
    one persisted judged frame, and what the files' summaries said."""

    source: str
    start: dt.date
    end: dt.date
    judged: DataFrame  # persisted; KIND says what each record is
    files: tuple[str, ...]  # relpaths read, in listing order
    dropped_columns: Mapping[str, tuple[str, ...]]
    ignored_files: Mapping[str, str]
    notes: Mapping[str, tuple[str, ...]]
    contract: SourceContract
    valid_rows: int
    quarantined_rows: int
    file_reads: tuple[LandingFile, ...] = ()  # what each file held, as the local reader says
    # column -> {declared null spelling: values read as null}
    null_spellings: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def rows(self) -> DataFrame:
        """Valid rows, exactly the contract schema; not deduplicated."""
        return self.judged.filter(F.col(KIND) == ROW).select(
            *(col(c) for c in self.contract.columns)
        )

    @property
    def quarantine(self) -> DataFrame:
        """Rejected rows with their reason, file, row number and raw record."""
        return self.judged.filter(F.col(KIND) == QUARANTINED).select(
            F.lit(self.source).alias("source"),
            *(F.col(QUARANTINE_PREFIX + name).alias(name) for name, _ in QUARANTINE_FIELDS),
        )

    def persist(self) -> SparkLandingBatch:
        """The judged frame is persisted when read; kept for callers that ask."""
        return self

    def unpersist(self) -> None:
        """Release the judged rows the read kept."""
        self.judged.unpersist()

    def counts(self) -> tuple[int, int]:
        """(valid rows, quarantined rows), from the files' summaries (no Spark job)."""
        return self.valid_rows, self.quarantined_rows


# Each landing file's judged rows are one block of the persisted frame. A block that
# spilled to disk is read back whole into the executor's heap when it fits Spark's memory
# store, which a block of a few hundred MiB on a 1 GiB executor does not survive; with a
# file past this size the frame stays on disk and is streamed back from there instead.
IN_MEMORY_FILE_BYTES = 32 << 20
# How much larger than its file a gzipped file's rows may be.
GZIP_EXPANSION = 10


def storage_level(files: Sequence[tuple[str, int]]) -> StorageLevel:
    """How the judged frame of these (path, size) files is persisted: in memory (and disk
    when memory runs short) for small files, on disk only when a file is large."""
    largest = max(
        (size * (GZIP_EXPANSION if path.endswith(".gz") else 1) for path, size in files),
        default=0,
    )
    return (
        StorageLevel.MEMORY_AND_DISK if largest <= IN_MEMORY_FILE_BYTES else StorageLevel.DISK_ONLY
    )


def read_landing_spark(
    spark: SparkSession,
    landing: Landing,
    contract: SourceContract,
    start: dt.date,
    end: dt.date,
    found: Mapping[dt.date, Discovery] | None = None,
    piece_bytes: int = PIECE_BYTES,
) -> SparkLandingBatch:
    """Read days ``[start, end)`` of a daily source on the executors (see docs/spark.md).

    ``found`` are the days' discoveries when the caller listed them already. The files are
    read once here (the judged frame is persisted); an unreadable file raises
    ``LandingFileError`` naming it, as the local reader does. Days before the source's
    first partition day raise ``DayBeforeFirstDayError``.
    """
    days = window_days(contract, start, end)
    require_settings(spark)
    root = landing_root(landing)
    listed = dict(found) if found is not None else {}
    missing = [day for day in days if day not in listed]
    listed.update(discover_days(root, contract, missing))
    entries = [
        (item.relpath, item.size, json.dumps(list(item.stamp)), item.modified_ns, day)
        for day in days
        for item in listed[day].files
    ]
    schema = judged_schema(contract)
    if entries:
        tasks = spark.sparkContext.parallelize(entries, numSlices=len(entries))
        judged = spark.createDataFrame(tasks, ENTRY_SCHEMA).mapInArrow(
            ReadFiles(root, contract, piece_bytes), schema
        )
    else:
        judged = spark.createDataFrame([], schema)
    judged = judged.persist(storage_level([(e[0], e[1]) for e in entries]))
    summaries = {
        r[FILE_PREFIX + "relpath"]: r
        for r in judged.filter(F.col(KIND).isin(FILE, ERROR))
        .select(F.col(KIND), *(F.col(FILE_PREFIX + name) for name, _ in FILE_FIELDS))
        .collect()
    }
    errors = sorted((p, r[FILE_PREFIX + "error"]) for p, r in summaries.items() if r[KIND] == ERROR)
    if errors:
        judged.unpersist()
        raise LandingFileError(*errors[0])
    files = tuple(entry[0] for entry in entries)
    dropped = {p: tuple(json.loads(summaries[p][FILE_PREFIX + "dropped"])) for p in files}
    notes = {p: tuple(json.loads(summaries[p][FILE_PREFIX + "notes"])) for p in files}
    return SparkLandingBatch(
        source=contract.name,
        start=start,
        end=end,
        judged=judged,
        files=files,
        dropped_columns={p: d for p, d in dropped.items() if d},
        ignored_files={p: why for day in days for p, why in listed[day].ignored.items()},
        notes={p: n for p, n in notes.items() if n},
        contract=contract,
        valid_rows=sum(int(summaries[p][FILE_PREFIX + "valid"]) for p in files),
        quarantined_rows=sum(int(summaries[p][FILE_PREFIX + "quarantined"]) for p in files),
        file_reads=tuple(_file_read(summaries[p]) for p in files),
        null_spellings=_null_spellings(summaries[p][FILE_PREFIX + "nulls"] for p in files),
    )


def _null_spellings(per_file: Iterable[str]) -> dict[str, dict[str, int]]:
    total: dict[str, dict[str, int]] = {}
    for text in per_file:
        for column, counts in json.loads(text).items():
            seen = total.setdefault(column, {})
            for spelling, count in counts.items():
                seen[spelling] = seen.get(spelling, 0) + count
    return {c: dict(sorted(n.items())) for c, n in sorted(total.items())}


def _file_read(summary: Any) -> LandingFile:
    def value(name: str) -> Any:
        return summary[FILE_PREFIX + name]

    return LandingFile(
        value("relpath"),
        value("format"),
        value("size"),
        value("sha256"),
        value("rows"),
        value("day"),
    )
