"""``idem_assets.lake.fingerprint`` computed by Spark executors, summed on the driver.

A fingerprint is a row count plus two sums (mod 2**64) of per-row hashes. Executors hash
their rows with the lake's own Polars code (an Arrow UDF); Spark sums the hashes split in
32-bit halves, which no long overflows for fewer than 2**31 rows, and the driver folds the
four sums. No row reaches the driver. Executors need this package importable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf

from idem_assets.lake.fingerprint import Fingerprint, row_hashes
from idem_assets.spark.schema import col

_PARTS = ("a_low", "a_high", "b_low", "b_high")
_HASH_PARTS = T.StructType([T.StructField(name, T.LongType()) for name in _PARTS])
_LOW = 0xFFFFFFFF
_ROWS = "fp_rows"


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


def hash_parts(columns: Sequence[str]) -> Column:
    """The per-row hash halves of the given columns (evaluated on the executors)."""
    if not columns:
        raise ValueError("cannot fingerprint rows without columns")
    return _row_hash_parts(F.struct(*(col(c) for c in columns)))


def fingerprint_aggregates(parts: Column, where: Column | None = None) -> list[Column]:
    """Aggregates (row count and four sums) of the rows where ``where`` holds."""
    keep = where if where is not None else F.lit(True)
    return [
        F.sum(F.when(keep, 1).otherwise(0)).alias(_ROWS),
        *(F.sum(F.when(keep, parts[p])).alias(f"fp_{p}") for p in _PARTS),
    ]


def fingerprint_of(sums: Any) -> Fingerprint:
    """The fingerprint from a row holding ``fingerprint_aggregates``."""

    def fold(low: int | None, high: int | None) -> int:
        return ((low or 0) + ((high or 0) << 32)) % (1 << 64)

    a = fold(sums["fp_a_low"], sums["fp_a_high"])
    b = fold(sums["fp_b_low"], sums["fp_b_high"])
    return Fingerprint(rows=int(sums[_ROWS] or 0), digest=f"{a:016x}{b:016x}")


def spark_fingerprint(df: DataFrame) -> Fingerprint:
    """``idem_assets.lake.fingerprint`` of a DataFrame's rows, hashed on the executors."""
    sums = df.agg(*fingerprint_aggregates(hash_parts(df.columns))).first()
    assert sums is not None
    return fingerprint_of(sums)
