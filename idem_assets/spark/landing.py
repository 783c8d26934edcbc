"""Reading daily landing files with Spark executors into contract rows and quarantine rows.

The driver only plans (``landing_files``); executors parse, type and judge every row with
the rules of docs/landing.md that docs/spark.md lists as covered. Valid rows and
quarantine rows are two lazy views of one judged DataFrame.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.raw import RAW_VALUE_CHARS
from idem_assets.spark.coerce import Refs, Typed, coerce, needs_text, non_blank, shown, stripped
from idem_assets.spark.landing_files import FileGroup, plan_days
from idem_assets.spark.resource import require_settings
from idem_assets.spark.schema import spark_schema

PATH, ROW, RAW, REASON = "__idem_path", "__idem_row", "__idem_raw", "__idem_reason"
_CORRUPT = "__idem_corrupt"
_PROBLEM = "__idem_problem"
_KEYS = "__idem_keys"
_LINE = "value"
QUARANTINE_COLUMNS = ("source", "partition_date", "source_file", "row_number", "reason",
                      "raw_record")


@dataclass(frozen=True)
class SparkLandingBatch:
    """A source's days read by Spark: lazy valid rows and quarantine rows, plus the plan."""

    source: str
    start: dt.date
    end: dt.date
    judged: DataFrame  # contract columns + reason/path/row/raw, one row per raw row
    files: tuple[str, ...]  # relpaths read
    dropped_columns: Mapping[str, tuple[str, ...]]  # CSV and Parquet files only
    ignored_files: Mapping[str, str]
    notes: Mapping[str, tuple[str, ...]]
    contract: SourceContract

    @property
    def rows(self) -> DataFrame:
        """Valid rows, exactly the contract schema; not deduplicated."""
        return self.judged.filter(F.col(REASON).isNull()).select(*self.contract.columns)

    @property
    def quarantine(self) -> DataFrame:
        """Rejected rows with their reason (row_number is null for CSV and JSON Lines)."""
        path = F.col(PATH)
        relpath = F.regexp_extract(
            path, rf"({re.escape(self.source)}/date=\d{{4}}-\d{{2}}-\d{{2}}/[^/]+)$", 1)
        return self.judged.filter(F.col(REASON).isNotNull()).select(
            F.lit(self.source).alias("source"),
            folder_date(path).alias("partition_date"),
            F.try_url_decode(F.replace(relpath, F.lit("+"), F.lit("%2B"))).alias("source_file"),
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
            F.count(F.lit(1)).alias("raw"), F.count(F.col(REASON)).alias("bad")).first()
        assert totals is not None
        return int(totals["raw"]) - int(totals["bad"]), int(totals["bad"])


def folder_date(path: Column) -> Column:
    """The ``date=YYYY-MM-DD`` folder a file sits in."""
    return F.try_to_date(F.regexp_extract(path, r"date=(\d{4}-\d{2}-\d{2})/[^/]+$", 1),
                         "yyyy-MM-dd")


def _quoted(name: str) -> Column:
    # Raw file column names are data, not code: always backquoted, never parsed.
    return F.col("`" + name.replace("`", "``") + "`")


def _raw_value(value: Column, kind: T.DataType) -> Column:
    if not isinstance(kind, T.StringType):
        return value
    more = F.length(value) - RAW_VALUE_CHARS
    return F.when(more > 0, F.concat(F.substring(value, 1, RAW_VALUE_CHARS), F.lit("...["),
                                     more.cast("string"), F.lit(" more chars]"))
                  ).otherwise(value)


def _row_rules(contract: SourceContract, typed: Mapping[str, Column], folder: Column
               ) -> list[Column]:
    """Messages of the row rules (keys, version, folder date, allowed values, signs)."""
    rules: list[Column] = []
    for key in contract.natural_key:
        value = typed[key]
        is_text = pa.types.is_string(contract.schema.field(key).type)
        blank = value.isNull() | (F.length(stripped(value)) == 0 if is_text else F.lit(False))
        rules.append(F.when(blank, F.lit(f"{key}: natural key is null or blank")))
    version = contract.version_column
    if version and version not in contract.natural_key:
        rules.append(F.when(typed[version].isNull(), F.lit(
            f"{version}: version column is null, so newest-wins cannot order this row")))
    if contract.date_column:
        name, value = contract.date_column, typed[contract.date_column]
        where = F.concat(F.lit("the partition folder date="), folder.cast("string"))
        rules.append(F.when(value.isNull(), F.concat(
            F.lit(f"{name}: is null but must equal "), where)))
        rules.append(F.when(value != folder, F.concat(
            F.lit(f"{name}: "), value.cast("string"), F.lit(" is outside "), where)))
    for name, allowed in sorted(contract.allowed_values.items()):
        choices = sorted(allowed)
        rules.append(F.when(typed[name].isNotNull() & ~typed[name].isin(choices), F.concat(
            F.lit(f"{name}: value '"), shown(typed[name]),
            F.lit(f"' is not allowed (expected one of {', '.join(choices)})"))))
    for name in contract.non_negative:
        rules.append(F.when(typed[name] < 0, F.concat(
            F.lit(f"{name}: "), typed[name].cast("string"), F.lit(" is negative (must be >= 0)"))))
    return rules


def _judge(frame: DataFrame, contract: SourceContract, problem: Column, raw: Column,
           row: Column) -> DataFrame:
    """Type every contract column and give each row its reason (null when valid).

    Each step is its own projection and refers to the previous step's columns by name:
    Spark keeps projections apart when merging them would repeat costly expressions, so
    no regex runs twice per value and the generated code stays compilable.
    """
    kinds = {f.name: f.dataType for f in frame.schema.fields}
    fields = list(enumerate(contract.schema))
    staged = frame.select(
        *(_quoted(f.name).alias(f.name) for _, f in fields if f.name in kinds),
        F.col(PATH), problem.cast("string").alias(_PROBLEM), raw.cast("string").alias(RAW),
        row.cast("bigint").alias(ROW))
    texts = {i: f for i, f in fields if f.name in kinds and needs_text(kinds[f.name], f.type)}
    staged = staged.withColumns({f"__s{i}": stripped(F.col(f.name)) for i, f in texts.items()})
    staged = staged.withColumns({f"__t{i}": non_blank(F.col(f"__s{i}")) for i in texts})
    coerced: dict[int, Typed] = {}
    for i, f in fields:
        refs = Refs(F.col(f.name), F.col(f"__t{i}") if i in texts else F.lit(None),
                    F.col(f"__v{i}"))
        if f.name in kinds:
            coerced[i] = coerce(f.name, refs, kinds[f.name], f.type)
        else:  # the file lacks it: the whole-file problem already quarantines the row
            coerced[i] = Typed(F.lit(None), F.lit(None).cast("string"))
    target = spark_schema(contract.schema)
    staged = staged.withColumns({f"__v{i}": coerced[i].value.cast(target[f.name].dataType)
                                 for i, f in fields})
    staged = staged.withColumns({f"__e{i}": coerced[i].error for i, _ in fields})
    typed = {f.name: F.col(f"__v{i}") for i, f in fields}
    parse_errors = F.concat_ws("; ", *(F.col(f"__e{i}") for i, _ in fields))
    rule_errors = F.concat_ws("; ", *_row_rules(contract, typed, folder_date(F.col(PATH))))
    reason = F.coalesce(F.col(_PROBLEM), F.when(parse_errors != "", parse_errors),
                        F.when(rule_errors != "", rule_errors))
    return staged.select(
        *(value.alias(name) for name, value in typed.items()),
        reason.alias(REASON), F.col(PATH), F.col(ROW), F.col(RAW),
    )


def _raw_record(frame: DataFrame, names: tuple[str, ...]) -> Column:
    kinds = dict((f.name, f.dataType) for f in frame.schema.fields)
    values = [_raw_value(_quoted(n), kinds[n]).alias(n) for n in names]
    return F.to_json(F.struct(*values))


def _uris(group: FileGroup) -> list[str]:
    # Hadoop paths take the plain (unescaped) path after the scheme.
    return [f"file://{p.resolve()}" for p in group.paths]


def _parquet(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    frame = spark.read.parquet(*_uris(group))
    frame = frame.select(*(_quoted(c) for c in group.columns),
                         F.col("_metadata.file_path").alias(PATH),
                         (F.col("_metadata.row_index") + 1).alias(ROW))
    problem = F.lit(group.problem).cast("string")
    return _judge(frame, contract, problem, _raw_record(frame, group.columns), F.col(ROW))


def _csv(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    schema = T.StructType([T.StructField(c, T.StringType()) for c in group.columns]
                          + [T.StructField(_CORRUPT, T.StringType())])
    frame = (
        spark.read.schema(schema)
        .options(header=True, multiLine=True, mode="PERMISSIVE", escape='"',
                 encoding="UTF-8", columnNameOfCorruptRecord=_CORRUPT)
        .csv(_uris(group))
        .select("*", F.col("_metadata.file_path").alias(PATH))
    )
    malformed = F.when(F.col(_CORRUPT).isNotNull(), F.lit(
        f"row does not have the header's {len(group.columns)} fields: check delimiters and "
        "quoting"))
    problem = F.coalesce(F.lit(group.problem).cast("string"), malformed)
    raw = F.when(F.col(_CORRUPT).isNotNull(), F.to_json(F.array(F.col(_CORRUPT)))).otherwise(
        _raw_record(frame, group.columns))
    return _judge(frame, contract, problem, raw, F.lit(None))


def json_lines(lines: DataFrame, contract: SourceContract) -> DataFrame:
    """Judge JSON Lines text (columns ``value`` and the file path); blank lines are dropped."""
    strings = T.StructType([T.StructField(c, T.StringType()) for c in contract.columns])
    lines = lines.filter(~F.col(_LINE).rlike(r"^\s*$"))
    parsed = lines.select(
        F.col(PATH), F.col(_LINE),
        F.when(F.is_valid_utf8(F.col(_LINE)), F.json_object_keys(F.col(_LINE))).alias(_KEYS),
        F.from_json(F.col(_LINE), strings).alias("j"),
    )
    # Which contract keys a file has at all: tiny per-file flags, joined back by file.
    presence = parsed.groupBy(PATH).agg(*(
        F.max(F.array_contains(F.col(_KEYS), c)).alias(f"has_{i}")
        for i, c in enumerate(contract.columns)))
    lacking = F.concat_ws(", ", *(F.when(F.col(f"has_{i}") == F.lit(False), F.lit(c))
                                  for i, c in enumerate(contract.columns)))
    frame = parsed.join(F.broadcast(presence), on=PATH, how="left").select(
        F.col(PATH), F.col(_LINE), F.col(_KEYS),
        F.when(lacking != "", F.concat(F.lit("file lacks contract column(s) "), lacking)
               ).alias("lacking"),
        *(F.col(f"j.{c}").alias(c) for c in contract.columns),
    )
    problem = F.coalesce(
        F.when(~F.is_valid_utf8(F.col(_LINE)), F.lit("line is not valid UTF-8")),
        F.when(F.col(_KEYS).isNull(), F.lit(
            "line is not a JSON object (invalid JSON, an array or a scalar)")),
        F.col("lacking"),
    )
    raw = F.when(F.col(_KEYS).isNull(), F.to_json(F.array(F.col(_LINE)))).otherwise(
        F.col(_LINE))
    return _judge(frame, contract, problem, raw, F.lit(None))


def _jsonl(spark: SparkSession, group: FileGroup, contract: SourceContract) -> DataFrame:
    lines = spark.read.text(_uris(group)).select(
        F.col(_LINE), F.col("_metadata.file_path").alias(PATH))
    return json_lines(lines, contract)


_READERS = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}


def empty_judged(spark: SparkSession, contract: SourceContract) -> DataFrame:
    """A judged frame with no rows (a range without files)."""
    fields = [*spark_schema(contract.schema).fields,
              T.StructField(REASON, T.StringType()), T.StructField(PATH, T.StringType()),
              T.StructField(ROW, T.LongType()), T.StructField(RAW, T.StringType())]
    return spark.createDataFrame([], T.StructType(fields))


def read_landing_spark(
    spark: SparkSession, landing_dir: str | Path, contract: SourceContract,
    start: dt.date, end: dt.date,
) -> SparkLandingBatch:
    """Read days ``[start, end)`` of a daily source on the executors (see docs/spark.md)."""
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source; read it with read_snapshot")
    if end < start:
        raise ValueError(f"end {end} is before start {start}; the range is [start, end)")
    require_settings(spark)
    plan = plan_days(landing_dir, contract, start, end)
    judged = empty_judged(spark, contract)
    for group in plan.groups:
        judged = judged.unionByName(_READERS[group.format](spark, group, contract))
    return SparkLandingBatch(
        source=contract.name, start=start, end=end, judged=judged, files=tuple(plan.files),
        dropped_columns=plan.dropped_columns, ignored_files=plan.ignored_files,
        notes=plan.notes, contract=contract,
    )
