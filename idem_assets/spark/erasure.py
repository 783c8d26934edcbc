"""Erased keys kept out of a Spark DataFrame, by the executors (see ``lake.erasure``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from idem_assets.lake.erasure import Erased
from idem_assets.spark.schema import col


def without_erased_spark(df: DataFrame, erased: Erased) -> DataFrame:
    """``df`` without the rows whose erasable columns hold an erased value (as text)."""
    for column, values in erased.of(df.columns).values.items():
        held = col(column).cast("string").isin(sorted(values))
        df = df.filter(~F.coalesce(held, F.lit(False)))
    return df
