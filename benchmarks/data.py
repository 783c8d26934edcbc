"""Benchmark inputs: TPC-H tables from tpchgen-cli, and synthetic shapes."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

DATA_DIR = Path(__file__).resolve().parent / ".data"
DAY = dt.date(2024, 3, 1)


def tpch(table: str, scale: float) -> Path:
    """Path of a TPC-H table in Parquet, generated once with tpchgen-cli."""
    out = DATA_DIR / f"tpch-sf{scale:g}"
    path = out / f"{table}.parquet"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        cli = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
        subprocess.run(
            [cli, "parquet", "-s", f"{scale:g}", f"--tables={table}", f"--output-dir={out}"],
            check=True,
        )
    return path


ORDERS_DAY_SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("customer_id", pa.int64()),
        ("status", pa.string()),
        ("amount", pa.decimal128(18, 2)),
        ("priority", pa.string()),
        ("clerk", pa.string()),
        ("comment", pa.string()),
        ("order_date", pa.date32()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)


def orders_day(scale: float = 1.0, day: dt.date = DAY) -> pa.Table:
    """TPC-H orders of a scale factor as ONE day of the orders table (1.5M rows at SF1)."""
    return _orders(scale, pl.lit(day))


def orders_days(scale: float = 1.0, days: int = 7, start: dt.date = DAY) -> pa.Table:
    """The same TPC-H orders spread over ``days`` days from ``start`` by their o_orderdate.

    An order's day is ``start`` plus its o_orderdate's day number modulo ``days``: every
    order is kept and the days come out the same size (~214k rows each for 7 days at SF1).
    """
    offset = (pl.col("o_orderdate") - pl.lit(dt.date(1992, 1, 1))).dt.total_days() % days
    return _orders(scale, pl.lit(start) + pl.duration(days=offset))


def _orders(scale: float, order_date: pl.Expr) -> pa.Table:
    raw = pl.read_parquet(tpch("orders", scale))
    frame = raw.select(
        pl.col("o_orderkey").cast(pl.Int64).alias("order_id"),
        pl.col("o_custkey").cast(pl.Int64).alias("customer_id"),
        pl.col("o_orderstatus").cast(pl.String).alias("status"),
        pl.col("o_totalprice").cast(pl.Decimal(18, 2)).alias("amount"),
        pl.col("o_orderpriority").cast(pl.String).alias("priority"),
        pl.col("o_clerk").cast(pl.String).alias("clerk"),
        pl.col("o_comment").cast(pl.String).alias("comment"),
        order_date.cast(pl.Date).alias("order_date"),
        (
            pl.lit(dt.datetime(2024, 3, 1)).dt.replace_time_zone("UTC")
            + pl.duration(milliseconds=pl.col("o_orderkey") % 86_400_000)
        ).alias("updated_at"),
    )
    return frame.to_arrow().cast(ORDERS_DAY_SCHEMA)


def orders_day_file(scale: float = 1.0) -> Path:
    """The orders day written once to Parquet, so each child process loads it quickly."""
    path = DATA_DIR / f"orders-day-sf{scale:g}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        pq.write_table(orders_day(scale), path)
    return path


def orders_days_file(scale: float = 1.0, days: int = 7) -> Path:
    """``orders_days`` written once to Parquet."""
    path = DATA_DIR / f"orders-{days}days-sf{scale:g}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        pq.write_table(orders_days(scale, days), path)
    return path


CUSTOMERS_SCHEMA = pa.schema(
    [
        ("customer_id", pa.int64()),
        ("name", pa.string()),
        ("email", pa.string()),
        ("segment", pa.string()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)


def customers(n: int, seed: int = 1) -> pa.Table:
    """``n`` synthetic customers with ids 0..n-1 (ids grow with sign-up time)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    frame = pl.DataFrame(
        {
            "customer_id": ids,
            "name": pl.Series(ids).cast(pl.String).str.pad_start(9, "0").str.replace(r"^", "c"),
            "email": pl.Series(ids).cast(pl.String) + "@example.com",
            "segment": rng.choice(["consumer", "smb", "enterprise"], n),
            "updated_at": np.full(n, np.datetime64("2024-03-01T00:00:00", "us")),
        }
    ).with_columns(pl.col("updated_at").dt.replace_time_zone("UTC"))
    return frame.to_arrow().cast(CUSTOMERS_SCHEMA)


def customer_changes(n: int, share: float, clustered: bool, seed: int = 2) -> pa.Table:
    """``share`` of ``n`` customers changed (half of them new ids when clustered).

    Clustered: the newest customers (the top of the id range) plus brand-new ones, the
    common shape of a day's changes. Random: ids drawn uniformly over the table.
    """
    rng = np.random.default_rng(seed)
    k = max(1, int(n * share))
    if clustered:
        ids = np.arange(n - k // 2, n + (k - k // 2), dtype=np.int64)
    else:
        ids = np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)
    frame = pl.DataFrame(
        {
            "customer_id": ids,
            "name": pl.Series(ids).cast(pl.String).str.replace(r"^", "changed-"),
            "email": pl.Series(ids).cast(pl.String) + "@example.org",
            "segment": rng.choice(["consumer", "smb", "enterprise"], k),
            "updated_at": np.full(k, np.datetime64("2024-03-02T00:00:00", "us")),
        }
    ).with_columns(pl.col("updated_at").dt.replace_time_zone("UTC"))
    return frame.to_arrow().cast(CUSTOMERS_SCHEMA)


CHANGE_OP = "op"
UPSERT, DELETE = "U", "D"


def customer_change_events(
    n: int, share: float, delete_share: float, clustered: bool, seed: int = 3
) -> pa.Table:
    """``customer_changes`` with a delete marker: ``delete_share`` of ``n`` keys deleted.

    The ``op`` column is "D" on that many rows of existing customers (drawn among the
    batch's), "U" on the others (updates and new customers); ``updated_at`` is the version.
    """
    changes = customer_changes(n, share, clustered)
    ids = changes.column("customer_id").to_numpy()
    existing = np.flatnonzero(ids < n)
    count = min(existing.size, max(1, int(n * delete_share)))
    op = np.full(ids.size, UPSERT, dtype=object)
    op[np.random.default_rng(seed).choice(existing, size=count, replace=False)] = DELETE
    return changes.append_column(CHANGE_OP, pa.array(op, pa.string()))
