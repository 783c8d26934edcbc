"""Typing and judging raw landing rows in Spark: a verdict per row, and the reason if bad.

Every reader (CSV, Parquet, JSON Lines, the stream) hands its raw rows here with, per
contract column, where its values are: a file column of a known kind, or a JSON value
whose kind is known per row. The outcome per row equals ``idem_assets.landing.normalise``:
a whole-file problem, else the parse errors, else the row rules broken.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from idem_assets.landing.coerce import ReadAs
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.layout import Layout
from idem_assets.spark.coerce import coerce, raw_of_arrow
from idem_assets.spark.json_values import (
    json_kind,
    json_schema,
    json_text,
    json_typed,
    text_kinds,
)
from idem_assets.spark.rules import row_rules
from idem_assets.spark.schema import spark_schema
from idem_assets.spark.values import (
    Raw,
    Stages,
    Typed,
    float_text,
    judged_text,
    non_blank,
    stripped,
)

PATH, ROW, RAW, REASON = "__idem_path", "__idem_row", "__idem_raw", "__idem_reason"
BAD = "__idem_bad"  # true on rows that go to quarantine; REASON (null elsewhere) says why
_PROBLEM = "__idem_problem"
_PARSE_ERRORS, _RULE_ERRORS = "__idem_parse_errors", "__idem_rule_errors"
_FOLDER = "__idem_folder"


@dataclass(frozen=True)
class FileColumn:
    """A contract column read from a file column (CSV: text; Parquet: its Arrow type)."""

    name: str  # the column's (unique) name in the raw frame
    kind: pa.DataType = pa.string()


@dataclass(frozen=True)
class JsonColumn:
    """A contract column read from a JSON value (a VARIANT column of the raw frame)."""

    name: str


def quoted(name: str) -> Column:
    """A raw column by name: file column names are data, always backquoted, never parsed."""
    return F.col("`" + name.replace("`", "``") + "`")


def _file_pattern(layout: Layout) -> tuple[str, dict[str, int]]:
    """A Java regex for ``<day folder>/<file>`` at the end of a path, and its day groups."""
    # Group 1 is the relpath; the layout's named groups follow in their order.
    groups = {name: index + 1 for name, index in re.compile(layout.regex()).groupindex.items()}
    return rf"(?:^|/)({layout.regex(java=True)}/[^/]+)$", groups


def folder_day(path: Column, layout: Layout) -> Column:
    """The day of the layout folder a file (given by its Spark file URI) sits in."""
    pattern, groups = _file_pattern(layout)
    if "date" in groups:
        text = F.regexp_extract(path, pattern, groups["date"])
    else:
        text = F.concat_ws(
            "-", *(F.regexp_extract(path, pattern, groups[part]) for part in ("yyyy", "mm", "dd"))
        )
    return F.try_to_date(text, "yyyy-MM-dd")


def landing_relpath(path: Column, layout: Layout) -> Column:
    """A file's path relative to the landing dir, decoded from its Spark file URI."""
    pattern, _ = _file_pattern(layout)
    relpath = F.regexp_extract(path, pattern, 1)
    return F.try_url_decode(F.replace(relpath, F.lit("+"), F.lit("%2B")))


def _folder(contract: SourceContract) -> Column:
    if contract.daily and contract.date_column:
        return folder_day(F.col(PATH), contract.layout)
    return F.lit(None).cast("date")


def _raw(
    source: FileColumn, column: Column, text: Column | None, stages: Stages | None = None
) -> Raw:
    raw = raw_of_arrow(column, source.kind)
    return Raw(raw.value, raw.kind, text, raw.scale, raw.zoned, raw.fraction_digits, stages)


def _texts(
    contract: SourceContract, sources: Mapping[str, FileColumn | JsonColumn]
) -> tuple[dict[int, Column], dict[int, Column]]:
    """The texts to stage per column index: strings to strip, and Polars' float text."""
    strip: dict[int, Column] = {}
    floats: dict[int, Column] = {}
    for i, f in enumerate(contract.schema):
        source, raw = sources.get(f.name), F.col(f"__r{i}")
        if isinstance(source, JsonColumn):
            if not pa.types.is_string(f.type):
                kinds = text_kinds(f.type, ReadAs.of(contract, f.name))
                strip[i] = F.when(F.col(f"__k{i}").isin(*kinds), F.col(f"__x{i}"))
        elif source is not None:
            read = _raw(source, raw, None)
            staging = judged_text(read.kind, f.type)
            if staging == "stripped":
                strip[i] = read.value
            elif staging == "float":
                floats[i] = float_text(read.value)
    return strip, floats


def _verdict(
    contract: SourceContract, coerced: Mapping[int, Typed], staged: DataFrame
) -> DataFrame:
    """Add BAD (as the local reader finds bad rows, without any text) and REASON."""
    typed = {f.name: F.col(f"__v{i}") for i, f in enumerate(contract.schema)}
    rules = row_rules(contract, typed, F.col(_FOLDER))
    bad = F.col(_PROBLEM).isNotNull()
    for i, c in coerced.items():
        if c.present is not None:
            bad = bad | (c.present & F.col(f"__v{i}").isNull())
    for rule in rules:
        bad = bad | F.coalesce(rule.broken, F.lit(False))
    # A verdict Spark cannot move: filters on it stay above this projection instead of being
    # pushed into the ones below, where they would inline (and evaluate twice) every value.
    bad = bad & (F.spark_partition_id() >= 0)
    staged = staged.withColumns(
        {
            BAD: bad,
            _PARSE_ERRORS: F.concat_ws("; ", *(F.col(f"__e{i}") for i in coerced)),
            _RULE_ERRORS: F.concat_ws("; ", *(F.when(rule.broken, rule.message) for rule in rules)),
        }
    )
    # Parse errors explain their row; row rules only judge rows whose values all parsed.
    parse_errors, rule_errors = F.col(_PARSE_ERRORS), F.col(_RULE_ERRORS)
    reason = F.coalesce(
        F.col(_PROBLEM),
        F.when(parse_errors != "", parse_errors),
        F.when(rule_errors != "", rule_errors),
        F.lit(""),
    )
    return staged.select(
        *(value.alias(name) for name, value in typed.items()),
        F.col(BAD),
        F.when(F.col(BAD), reason).alias(REASON),
        F.col(PATH),
        F.col(ROW),
        F.col(RAW),
    )


def judge(
    frame: DataFrame,
    contract: SourceContract,
    problem: Column,
    raw_record: Column,
    row: Column,
    sources: Mapping[str, FileColumn | JsonColumn],
) -> DataFrame:
    """Type every contract column and judge each row: BAD, and REASON where it is bad.

    ``sources`` maps contract columns to where the frame holds them; a column it lacks is
    null (the whole-file ``problem`` already quarantines such rows). Each step is its own
    projection and refers to the previous step's columns by name (``Stages``): Spark keeps
    projections apart when merging them would repeat costly expressions, so no regex runs
    twice per value and the generated code stays small.
    """
    fields = [(i, f) for i, f in enumerate(contract.schema) if f.name in sources]
    jsons = [i for i, f in fields if isinstance(sources[f.name], JsonColumn)]
    staged = frame.select(
        *(quoted(sources[f.name].name).alias(f"__r{i}") for i, f in fields),
        F.col(PATH),
        problem.cast("string").alias(_PROBLEM),
        raw_record.cast("string").alias(RAW),
        row.cast("bigint").alias(ROW),
    )
    staged = staged.withColumns(
        {
            **{f"__y{i}": json_schema(F.col(f"__r{i}")) for i in jsons},
            **{f"__x{i}": json_text(F.col(f"__r{i}")) for i in jsons},
            _FOLDER: _folder(contract),
        }
    )
    staged = staged.withColumns({f"__k{i}": json_kind(F.col(f"__y{i}")) for i in jsons})
    strip, floats = _texts(contract, sources)
    staged = staged.withColumns({f"__s{i}": stripped(text) for i, text in strip.items()})
    staged = staged.withColumns(
        {
            **{f"__t{i}": non_blank(F.col(f"__s{i}")) for i in strip},
            **{f"__n{i}": text for i, text in floats.items()},
        }
    )

    def typed_of(i: int, field: pa.Field, stages: Stages) -> Typed:
        read_as, typed = ReadAs.of(contract, field.name), F.col(f"__v{i}")
        text = F.col(f"__t{i}") if i in strip else None
        source = sources[field.name]
        if isinstance(source, JsonColumn):
            return json_typed(
                field.name,
                F.col(f"__r{i}"),
                F.col(f"__k{i}"),
                F.col(f"__x{i}"),
                text,
                field.type,
                typed,
                read_as,
                stages,
            )
        judged_by = F.col(f"__n{i}") if i in floats else text
        return coerce(
            field.name,
            _raw(source, F.col(f"__r{i}"), judged_by, stages),
            field.type,
            typed,
            read_as,
        )

    stages = Stages("__p")
    coerced = {i: typed_of(i, f, stages.child(str(i))) for i, f in fields}
    for level in stages.levels:
        staged = staged.withColumns(level)
    target = spark_schema(contract.schema)
    staged = staged.withColumns(
        {
            f"__v{i}": (coerced[i].value if i in coerced else F.lit(None)).cast(
                target[f.name].dataType
            )
            for i, f in enumerate(contract.schema)
        }
    )
    staged = staged.withColumns({f"__e{i}": c.error for i, c in coerced.items()})
    return _verdict(contract, coerced, staged)
