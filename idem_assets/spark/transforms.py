"""Spark versions of the lake's transforms, with results identical to the local engine.

``dedupe_newest_spark`` keeps the row ``idem_assets.lake.dedupe_newest`` keeps, for any
input; ``spark_fingerprint`` equals ``idem_assets.lake.fingerprint`` of the same rows and
is computed on the executors; ``read_landing_spark`` reads landing files on the executors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa
from idem_assets.spark.landing import SparkLandingBatch, read_landing_spark
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf

from idem_assets.lake.dedupe import survivor_order
from idem_assets.lake.fingerprint import Fingerprint, row_hashes
from idem_assets.spark.schema import col

__all__ = [
    "SparkDedupe",
    "SparkLandingBatch",
    "dedupe_newest_spark",
    "read_landing_spark",
    "spark_fingerprint",
    "survivor_ordering",
]

_RANK = "__idem_rank"
_FIRST = "__idem_first"
_NEWEST = "__idem_newest"
_LOW = 0xFFFFFFFF


class SparkDedupe(NamedTuple):
    """Surviving rows (lazy) and what the dedupe dropped (computed in one Spark job)."""

    rows: DataFrame
    duplicates_dropped: int
    # Keys whose newest versions tie on the version column but differ in content.
    conflicting_keys: int


def survivor_ordering(
    columns: Sequence[str], key: Sequence[str], version_column: str | None,
    then_by: Sequence[Column] = (),
) -> list[Column]:
    """Window ordering that puts each key's surviving row first, as ``survivor_order`` does.

    Version descending, then every other column in name order descending, nulls last;
    Spark compares strings by UTF-8 bytes, as Polars does, so both pick the same row.
    """
    order, descending = survivor_order(columns, key, version_column)
    within = [
        col(name).desc_nulls_last() if desc else col(name).asc_nulls_last()
        for name, desc in zip(order, descending, strict=True)
        if name not in key
    ]
    return [*within, *then_by]


def _check_columns(df: DataFrame, key: Sequence[str], version_column: str | None) -> None:
    wanted = [*key, *([version_column] if version_column else [])]
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise ValueError(f"cannot dedupe: column(s) {missing} not in {df.columns}")
    if not key:
        raise ValueError("cannot dedupe without a natural key")


def dedupe_newest_spark(
    df: DataFrame, key: Sequence[str], version_column: str | None
) -> SparkDedupe:
    """One row per ``key``: highest ``version_column``, ties broken by content.

    The same survivors as ``dedupe_newest`` for any input and any row order. The counts
    come from one aggregation over the ranked rows; ``rows`` stays lazy (persist the input
    if it is expensive to compute twice).
    """
    key = list(key)
    _check_columns(df, key, version_column)
    columns = list(df.columns)
    by_key = Window.partitionBy(*(col(k) for k in key))
    ordered = by_key.orderBy(*survivor_ordering(columns, key, version_column))
    content = F.struct(*(col(c) for c in columns))
    ranked = df.withColumn(_RANK, F.row_number().over(ordered))
    survivors = ranked.filter(F.col(_RANK) == 1).drop(_RANK)
    if version_column is None:
        conflict = F.lit(False)
    else:
        # The ranked frame's first row per key is the survivor; a newest-version row that
        # differs from it in content is a conflict the version alone could not decide.
        ranked = ranked.withColumn(_FIRST, F.first(content).over(ordered)).withColumn(
            _NEWEST, col(version_column) == F.max(col(version_column)).over(by_key))
        conflict = F.col(_NEWEST) & ~content.eqNullSafe(F.col(_FIRST))
    stats = ranked.agg(
        F.sum(F.when(F.col(_RANK) > 1, 1).otherwise(0)).alias("dropped"),
        F.count_distinct(F.when(conflict, F.struct(*(col(k) for k in key)))).alias("conflicts"),
    ).first()
    assert stats is not None
    return SparkDedupe(survivors, int(stats["dropped"] or 0), int(stats["conflicts"] or 0))


_HASH_PARTS = T.StructType(
    [T.StructField(name, T.LongType()) for name in ("a_low", "a_high", "b_low", "b_high")])


@arrow_udf(_HASH_PARTS)
def _row_hash_parts(rows: pa.Array) -> pa.Array:
    """Per-row fingerprint hashes, split in 32-bit halves so Spark can sum them exactly."""
    import numpy as np

    first, second = row_hashes(pa.RecordBatch.from_struct_array(rows))
    parts = {}
    for name, hashes in (("a", first), ("b", second)):
        parts[f"{name}_low"] = pa.array((hashes & np.uint64(_LOW)).astype(np.int64))
        parts[f"{name}_high"] = pa.array((hashes >> np.uint64(32)).astype(np.int64))
    return pa.StructArray.from_arrays(list(parts.values()), names=list(parts))


def spark_fingerprint(df: DataFrame) -> Fingerprint:
    """``idem_assets.lake.fingerprint`` of a DataFrame's rows, hashed on the executors.

    The fingerprint is a sum of per-row hashes, so each executor hashes its rows with the
    same Polars code and the driver only adds four numbers; no row reaches the driver.
    Executors need this package (and its pinned Polars) importable.
    """
    if not df.columns:
        raise ValueError("cannot fingerprint a DataFrame without columns")
    hashed = df.select(_row_hash_parts(F.struct(*(col(c) for c in df.columns))).alias("h"))
    sums = hashed.agg(
        F.count(F.lit(1)).alias("rows"),
        *(F.sum(f"h.{part}").alias(part) for part in ("a_low", "a_high", "b_low", "b_high")),
    ).first()
    assert sums is not None

    def combine(low: int | None, high: int | None) -> int:
        return ((low or 0) + ((high or 0) << 32)) % (1 << 64)

    a = combine(sums["a_low"], sums["a_high"])
    b = combine(sums["b_low"], sums["b_high"])
    return Fingerprint(rows=int(sums["rows"]), digest=f"{a:016x}{b:016x}")
