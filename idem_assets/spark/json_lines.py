"""JSON Lines text to judged rows on the executors (the landing reader's and the stream's)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.normalise import shown_column
from idem_assets.spark.judge import PATH, JsonColumn, judge

LINE = "value"  # the text source's column
_KEYS = "__idem_keys"
_VALUES = "__idem_json"


def json_lines(lines: DataFrame, contract: SourceContract) -> DataFrame:
    """Judge JSON Lines text (columns ``value`` and the file path); blank lines are dropped."""
    names = [contract.file_name(c) for c in contract.columns]
    variants = T.StructType([T.StructField(n, T.VariantType()) for n in names])
    lines = lines.filter(~F.col(LINE).rlike(r"^\s*$"))
    parsed = lines.select(
        F.col(PATH),
        F.col(LINE),
        F.when(F.is_valid_utf8(F.col(LINE)), F.json_object_keys(F.col(LINE))).alias(_KEYS),
        F.from_json(F.col(LINE), variants).alias(_VALUES),
    )
    # Which contract keys a file has at all: tiny per-file flags, joined back by file.
    presence = parsed.groupBy(PATH).agg(
        *(F.max(F.array_contains(F.col(_KEYS), n)).alias(f"has_{i}") for i, n in enumerate(names))
    )
    lacking = F.concat_ws(
        ", ",
        *(
            F.when(F.col(f"has_{i}") == F.lit(False), F.lit(shown_column(c, contract)))
            for i, c in enumerate(contract.columns)
        ),
    )
    frame = parsed.join(F.broadcast(presence), on=PATH, how="left").select(
        F.col(PATH),
        F.col(LINE),
        F.col(_KEYS),
        F.when(lacking != "", F.concat(F.lit("file lacks contract column(s) "), lacking)).alias(
            "lacking"
        ),
        *(F.col(_VALUES).getField(n).alias(f"__j{i}") for i, n in enumerate(names)),
    )
    problem = F.coalesce(
        F.when(~F.is_valid_utf8(F.col(LINE)), F.lit("line is not valid UTF-8")),
        F.when(
            F.col(_KEYS).isNull(),
            F.lit("line is not a JSON object (invalid JSON, an array or a scalar)"),
        ),
        F.col("lacking"),
    )
    raw = F.when(F.col(_KEYS).isNull(), F.to_json(F.array(F.col(LINE)))).otherwise(F.col(LINE))
    sources = {c: JsonColumn(f"__j{i}") for i, c in enumerate(contract.columns)}
    return judge(frame, contract, problem, raw, F.lit(None), sources)
