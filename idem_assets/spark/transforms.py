"""Spark versions of the lake's transforms, with results identical to the local engine.

``dedupe_newest_spark`` keeps the row ``idem_assets.lake.dedupe_newest`` keeps, for any
input. The fingerprint (``spark/fingerprint.py``) and the landing reader
(``spark/landing.py``) have modules of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from idem_assets.lake.dedupe import survivor_order
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.spark.fingerprint import (
    fingerprint_aggregates,
    fingerprint_of,
    hash_parts,
)
from idem_assets.spark.schema import col

__all__ = [
    "SparkDedupe",
    "dedupe_newest_spark",
    "survivor",
    "survivor_ordering",
]

_RANK = "__idem_rank"
_FIRST = "__idem_first"
_NEWEST = "__idem_newest"


class SparkDedupe(NamedTuple):
    """Surviving rows (lazy) and what the dedupe dropped (computed in one Spark job)."""

    rows: DataFrame
    duplicates_dropped: int
    # Keys whose newest versions tie on the version column but differ in content.
    conflicting_keys: int
    # Fingerprint of the surviving rows, when asked for (same job, hashed on executors).
    fingerprint: Fingerprint | None = None
    # Values of the caller's extra aggregates (same job).
    extra: dict[str, Any] | None = None


def survivor() -> Column:
    """True on the surviving row of each key, for ``extra_aggregates`` of the dedupe."""
    return F.col(_RANK) == 1


def survivor_ordering(
    columns: Sequence[str],
    key: Sequence[str],
    version_column: str | None,
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


def _key_stats(df: DataFrame, key: list[str], version_column: str | None) -> tuple[int, int]:
    """Rows dropped and conflicting keys, from one aggregation by key."""
    per_key = [F.count(F.lit(1)).alias("n")]
    if version_column:
        # Content hash with a null flag per column, so (1, null) and (null, 1) differ.
        content = F.xxhash64(*(e for c in df.columns for e in (col(c), col(c).isNull())))
        version = col(version_column).alias("v")
        # Among a key's newest-version rows: the largest and (via ~) the smallest hash.
        per_key += [
            F.max(F.struct(version, content.alias("h"))).alias("hi"),
            F.max(F.struct(version, F.bitwise_not(content).alias("h"))).alias("lo"),
        ]
        conflict = F.col("hi.v").isNotNull() & (F.col("hi.h") != F.bitwise_not(F.col("lo.h")))
    else:
        conflict = F.lit(False)
    stats = (
        df.groupBy(*(col(k) for k in key))
        .agg(*per_key)
        .agg(
            F.sum("n").alias("rows"),
            F.count(F.lit(1)).alias("keys"),
            F.sum(conflict.cast("int")).alias("conflicts"),
        )
        .first()
    )
    assert stats is not None
    return int(stats["rows"] or 0) - int(stats["keys"]), int(stats["conflicts"] or 0)


def dedupe_newest_spark(
    df: DataFrame,
    key: Sequence[str],
    version_column: str | None,
    *,
    fingerprint: bool = False,
    extra_aggregates: Mapping[str, Column] | None = None,
) -> SparkDedupe:
    """One row per ``key``: highest ``version_column``, ties broken by content.

    The same survivors as ``dedupe_newest`` for any input and any row order; ``rows``
    stays lazy. The counts come from one hash aggregation per key (no sort of whole rows).
    With ``fingerprint`` or ``extra_aggregates`` (which may use ``survivor()``), one
    aggregation over the ranked rows computes them all instead.
    """
    key = list(key)
    _check_columns(df, key, version_column)
    columns = list(df.columns)
    by_key = Window.partitionBy(*(col(k) for k in key))
    ordered = by_key.orderBy(*survivor_ordering(columns, key, version_column))
    content = F.struct(*(col(c) for c in columns))
    ranked = df.withColumn(_RANK, F.row_number().over(ordered))
    survivors = ranked.filter(F.col(_RANK) == 1).drop(_RANK)
    if not fingerprint and not extra_aggregates:
        return SparkDedupe(survivors, *_key_stats(df, key, version_column))
    if version_column is None:
        conflict = F.lit(False)
    else:
        # The ranked frame's first row per key is the survivor; a newest-version row that
        # differs from it in content is a conflict the version alone could not decide.
        ranked = ranked.withColumn(_FIRST, F.first(content).over(ordered)).withColumn(
            _NEWEST, col(version_column) == F.max(col(version_column)).over(by_key)
        )
        conflict = F.col(_NEWEST) & ~content.eqNullSafe(F.col(_FIRST))
    extra = dict(extra_aggregates or {})
    aggregates = [
        F.sum(F.when(F.col(_RANK) > 1, 1).otherwise(0)).alias("dropped"),
        F.count_distinct(F.when(conflict, F.struct(*(col(k) for k in key)))).alias("conflicts"),
        *(value.alias(f"extra_{name}") for name, value in extra.items()),
    ]
    if fingerprint:
        aggregates += fingerprint_aggregates(hash_parts(columns), where=survivor())
    stats = ranked.agg(*aggregates).first()
    assert stats is not None
    return SparkDedupe(
        survivors,
        int(stats["dropped"] or 0),
        int(stats["conflicts"] or 0),
        fingerprint_of(stats) if fingerprint else None,
        {name: stats[f"extra_{name}"] for name in extra},
    )
