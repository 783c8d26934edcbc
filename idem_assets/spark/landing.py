"""Reading daily landing files with Spark executors into contract rows and quarantine rows.

The driver only plans (``landing_files``); executors parse, type and judge every row with
the rules of docs/landing.md that docs/spark.md lists as covered (``judge``). Valid rows
and quarantine rows are two lazy views of one judged DataFrame.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from idem_assets.landing.contract import DayBeforeFirstDayError, SourceContract
from idem_assets.landing.files import Discovery, Landing
from idem_assets.landing.raw import RAW_VALUE_CHARS
from idem_assets.spark.json_lines import LINE, json_lines
from idem_assets.spark.judge import (
    BAD,
    PATH,
    RAW,
    REASON,
    ROW,
    FileColumn,
    folder_day,
    judge,
    landing_relpath,
    quoted,
)
from idem_assets.spark.landing_files import FileGroup, plan_days
from idem_assets.spark.resource import require_settings
from idem_assets.spark.schema import spark_schema

_CORRUPT = "__idem_corrupt"
QUARANTINE_COLUMNS = (
    "source",
    "partition_date",
    "source_file",
    "row_number",
    "reason",
    "raw_record",
)


@dataclass(frozen=True)
class SparkLandingBatch:
    """A source's days read by Spark: lazy valid rows and quarantine rows, plus the plan."""

    source: str
    start: dt.date
    end: dt.date
    judged: DataFrame  # contract columns + bad/reason/path/row/raw, one row per raw row
    files: tuple[str, ...]  # relpaths read
    dropped_columns: Mapping[str, tuple[str, ...]]  # CSV and Parquet files only
    ignored_files: Mapping[str, str]
    notes: Mapping[str, tuple[str, ...]]
    contract: SourceContract

    @property
    def rows(self) -> DataFrame:
        """Valid rows, exactly the contract schema; not deduplicated."""
        return self.judged.filter(~F.col(BAD)).select(*self.contract.columns)

    @property
    def quarantine(self) -> DataFrame:
        """Rejected rows with their reason (row_number is null for CSV and JSON Lines)."""
        path, layout = F.col(PATH), self.contract.layout
        return self.judged.filter(F.col(BAD)).select(
            F.lit(self.source).alias("source"),
            folder_day(path, layout).alias("partition_date"),
            landing_relpath(path, layout).alias("source_file"),
            F.col(ROW).alias("row_number"),
            F.col(REASON).alias("reason"),
            F.col(RAW).alias("raw_record"),
        )

    def persist(self) -> SparkLandingBatch:
        """Keep the judged rows (memory, spilling to disk): the files are parsed once for
        ``rows``, ``quarantine`` and ``counts``. Call ``unpersist`` when done."""
        self.judged.persist(StorageLevel.MEMORY_AND_DISK)
        return self

    def unpersist(self) -> None:
        """Release what ``persist`` kept."""
        self.judged.unpersist()

    def counts(self) -> tuple[int, int]:
        """(valid rows, quarantined rows), counted in one Spark job."""
        totals = self.judged.agg(
            F.count(F.lit(1)).alias("raw"), F.count_if(F.col(BAD)).alias("bad")
        ).first()
        assert totals is not None
        return int(totals["raw"]) - int(totals["bad"]), int(totals["bad"])


def _raw_value(value: Column, kind: T.DataType) -> Column:
    if not isinstance(kind, T.StringType):
        return value
    more = F.length(value) - RAW_VALUE_CHARS
    return F.when(
        more > 0,
        F.concat(
            F.substring(value, 1, RAW_VALUE_CHARS),
            F.lit("...["),
            more.cast("string"),
            F.lit(" more chars]"),
        ),
    ).otherwise(value)


def _raw_record(frame: DataFrame, names: tuple[str, ...]) -> Column:
    kinds = {f.name: f.dataType for f in frame.schema.fields}
    return F.to_json(F.struct(*(_raw_value(quoted(n), kinds[n]).alias(n) for n in names)))


def _file_columns(group: FileGroup, contract: SourceContract) -> dict[str, FileColumn]:
    """Where each contract column is in the group's files (by its file name)."""
    kinds = dict(zip(group.columns, group.types, strict=True)) if group.types else {}
    out = {}
    for column in contract.columns:
        name = contract.file_name(column)
        if name in group.columns:
            out[column] = FileColumn(name, kinds[name]) if kinds else FileColumn(name)
    return out


def _uris(group: FileGroup) -> list[str]:
    # Hadoop paths take the plain (unescaped) path after the scheme.
    return [f"file://{p.resolve()}" for p in group.paths]


def _parquet(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    frame = spark.read.parquet(*_uris(group))
    frame = frame.select(
        *(quoted(c) for c in group.columns),
        F.col("_metadata.file_path").alias(PATH),
        (F.col("_metadata.row_index") + 1).alias(ROW),
    )
    problem = F.lit(group.problem).cast("string")
    return judge(
        frame,
        contract,
        problem,
        _raw_record(frame, group.columns),
        F.col(ROW),
        _file_columns(group, contract),
    )


def _csv(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    schema = T.StructType(
        [T.StructField(c, T.StringType()) for c in group.columns]
        + [T.StructField(_CORRUPT, T.StringType())]
    )
    frame = (
        spark.read.schema(schema)
        .options(
            header=True,
            multiLine=True,
            mode="PERMISSIVE",
            escape='"',
            sep=contract.csv_delimiter,
            encoding="UTF-8",
            columnNameOfCorruptRecord=_CORRUPT,
        )
        .csv(_uris(group))
        .select("*", F.col("_metadata.file_path").alias(PATH))
    )
    malformed = F.when(
        F.col(_CORRUPT).isNotNull(),
        F.lit(
            f"row does not have the header's {len(group.columns)} fields: check delimiters and "
            "quoting"
        ),
    )
    problem = F.coalesce(F.lit(group.problem).cast("string"), malformed)
    raw = F.when(F.col(_CORRUPT).isNotNull(), F.to_json(F.array(F.col(_CORRUPT)))).otherwise(
        _raw_record(frame, group.columns)
    )
    return judge(frame, contract, problem, raw, F.lit(None), _file_columns(group, contract))


def _jsonl(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    lines = spark.read.text(_uris(group)).select(
        F.col(LINE), F.col("_metadata.file_path").alias(PATH)
    )
    return json_lines(lines, contract)


_READERS = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}


def empty_judged(spark: SparkSession, contract: SourceContract) -> DataFrame:
    """A judged frame with no rows (a range without files)."""
    fields = [
        *spark_schema(contract.schema).fields,
        T.StructField(BAD, T.BooleanType()),
        T.StructField(REASON, T.StringType()),
        T.StructField(PATH, T.StringType()),
        T.StructField(ROW, T.LongType()),
        T.StructField(RAW, T.StringType()),
    ]
    return spark.createDataFrame([], T.StructType(fields))


def read_landing_spark(
    spark: SparkSession,
    landing: Landing,
    contract: SourceContract,
    start: dt.date,
    end: dt.date,
    found: Mapping[dt.date, Discovery] | None = None,
) -> SparkLandingBatch:
    """Read days ``[start, end)`` of a daily source on the executors (see docs/spark.md).

    Days before the source's first partition day raise ``DayBeforeFirstDayError``.
    """
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source; read it with read_snapshot")
    if end < start:
        raise ValueError(f"end {end} is before start {start}; the range is [start, end)")
    days = [start + dt.timedelta(days=i) for i in range((end - start).days)]
    early = [day for day in days if contract.before_first_day(day)]
    if early:
        raise DayBeforeFirstDayError(contract, early)
    require_settings(spark)
    plan = plan_days(landing, contract, start, end, found)
    judged = empty_judged(spark, contract)
    for group in plan.groups:
        judged = judged.unionByName(_READERS[group.format](spark, group, contract))
    return SparkLandingBatch(
        source=contract.name,
        start=start,
        end=end,
        judged=judged,
        files=tuple(plan.files),
        dropped_columns=plan.dropped_columns,
        ignored_files=plan.ignored_files,
        notes=plan.notes,
        contract=contract,
    )
