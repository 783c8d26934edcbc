"""daily_sales: revenue and order counts per day, recomputed and overwritten per partition."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.defs.sales.checks import RECONCILIATION
from idem_assets.defs.sales.orders import NON_REVENUE_STATUSES, ORDERS_TABLE
from idem_assets.io_manager import Window, WriteSpec, read, target_table
from idem_assets.lake.frames import conform
from idem_assets.landing.column_types import TypedColumn
from idem_assets.lib import LakeAssetDef, lake_asset
from idem_assets.lib.automation import follows_upstream
from idem_assets.partitions import partition_dates
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


SALES_COLUMNS = (
    TypedColumn.of("order_date", "date", nullable=False),
    TypedColumn.of("orders", "int64"),
    TypedColumn.of("revenue_orders", "int64"),
    TypedColumn.of("revenue", "decimal(18,2)"),  # orders.amount's type
    TypedColumn.of("customers", "int64"),
)


def aggregate_sales(orders: pa.Table, start: dt.date, end: dt.date) -> pa.Table:
    """One row per day of ``[start, end)``: order count, revenue and buyers (zeros if none)."""
    import polars as pl  # here, not at import: see idem_assets._lazy

    frame = pl.from_arrow(orders.select(["order_date", "customer_id", "amount", "status"]))
    assert isinstance(frame, pl.DataFrame)
    earns = ~pl.col("status").is_in(NON_REVENUE_STATUSES)
    per_day = frame.group_by("order_date").agg(
        pl.len().cast(pl.Int64).alias("orders"),
        earns.sum().cast(pl.Int64).alias("revenue_orders"),
        pl.col("amount").filter(earns).sum().alias("revenue"),
        pl.col("customer_id").filter(earns).n_unique().cast(pl.Int64).alias("customers"),
    )
    days = pl.DataFrame(
        {"order_date": pl.date_range(start, end, interval="1d", closed="left", eager=True)}
    )
    filled = (
        days.join(per_day, on="order_date", how="left")
        .with_columns(
            pl.col("orders", "revenue_orders", "customers").fill_null(0),
            pl.col("revenue").fill_null(0),
        )
        .sort("order_date")
    )
    return conform(filled.to_arrow(), SALES_TABLE.arrow_schema)


def sales_rows(lake: LakeResource, window: Window) -> pa.Table:
    """Recompute daily sales of the window from the stored orders table."""
    assert window.start is not None and window.end is not None
    spec = ORDERS_TABLE.spec
    orders = read(
        spec, target_table(lake, spec, ORDERS_TABLE.key), window, ORDERS_TABLE.arrow_schema
    )
    return aggregate_sales(orders, window.start, window.end)


SALES_TABLE = LakeAssetDef(
    name="daily_sales",
    spec=WriteSpec(
        strategy="overwrite", natural_key=("order_date",), partition_column="order_date"
    ),
    schema=SALES_COLUMNS,
    compute=sales_rows,
    column_descriptions={
        "order_date": "The day; natural key, Delta partition and Dagster partition.",
        "orders": "All orders of the day.",
        "revenue_orders": "Orders not cancelled or refunded.",
        "revenue": "Sum of amount over revenue orders.",
        "customers": "Distinct customers with a revenue order.",
    },
    partitions_def=ORDERS_TABLE.partitions_def,
    owners=("team:data-platform",),
    automation_condition=follows_upstream(),
)


@lake_asset(
    SALES_TABLE,
    ins={"orders": dg.AssetIn(key=ORDERS_TABLE.key)},
    checks=(RECONCILIATION,),
    description=(
        "Revenue and order counts per day, recomputed from the orders partition and written by "
        "overwriting that day: the idempotent form of 'INSERT an aggregate per run'. Every day "
        "of the range gets exactly one row, zeros included."
    ),
)
def daily_sales(context: dg.AssetExecutionContext, orders):  # noqa: ANN001, ANN201
    """Daily revenue for the partition range, from the orders table (an Arrow table in, one
    out; unannotated, so that loading the definitions does not import Arrow)."""
    start, end = partition_dates(context)
    return aggregate_sales(orders, start, end)
