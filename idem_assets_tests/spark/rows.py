"""Row builders for the Spark tests: seeded orders with ties, and Arrow <-> Spark helpers."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from idem_assets.sample.sources import ORDERS

STATUSES = ("placed", "paid", "shipped", "é-paid", "Z", None)
BASE = dt.datetime(2024, 3, 1, 8, tzinfo=dt.UTC)


def tied_orders(
    seed: int, rows: int = 600, keys: int = 60, days: int = 3, start: dt.date = dt.date(2024, 3, 1)
) -> pa.Table:
    """Orders where many rows share a key and a version but differ in content (and nulls)."""
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        key = rng.randrange(keys)
        version = rng.choice(
            [BASE, BASE + dt.timedelta(hours=1), None, BASE + dt.timedelta(hours=1, microseconds=1)]
        )
        out.append(
            {
                "order_id": key,
                "customer_id": rng.choice([1, 2, None]),
                "amount": decimal.Decimal(rng.choice(["1.00", "1.10", "-0.01", "99.99"])),
                "status": rng.choice(STATUSES),
                "order_date": start + dt.timedelta(days=key % days),
                "updated_at": version,
            }
        )
    return pa.Table.from_pylist(out, schema=ORDERS.schema)


def to_spark(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A small Arrow table as a Spark DataFrame (test data only: it goes through the driver)."""
    return spark.createDataFrame(table)


def shuffled(table: pa.Table, seed: int) -> pa.Table:
    """The same rows in another order."""
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    return table.take(order)
