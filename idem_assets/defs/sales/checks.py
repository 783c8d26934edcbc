"""Checks of daily_sales, including an independent reconciliation with orders."""

from __future__ import annotations

import decimal
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.defs.sales.orders import NON_REVENUE_STATUSES, ORDERS_TABLE
from idem_assets.io_manager import Window, read, target_table
from idem_assets.lib import LakeAssetDef
from idem_assets.lib.checks import CheckName, LakeCheck, spans
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


RECONCILES_WITH_ORDERS = "reconciles_with_orders"


def _totals_by_day(orders: pa.Table) -> dict[object, tuple[int, decimal.Decimal]]:
    # Arrow compute, not the Polars path the asset uses: an independent recomputation.
    earns = pc.invert(pc.is_in(orders.column("status"), pa.array(NON_REVENUE_STATUSES)))
    earning = orders.filter(pc.fill_null(earns, True))
    counts = orders.group_by("order_date").aggregate([("order_id", "count")])
    sums = earning.group_by("order_date").aggregate([("amount", "sum")])
    revenue = dict(
        zip(
            sums.column("order_date").to_pylist(),
            sums.column("amount_sum").to_pylist(),
            strict=True,
        )
    )
    return {
        day: (count, revenue.get(day) or decimal.Decimal("0"))
        for day, count in zip(
            counts.column("order_date").to_pylist(),
            counts.column("order_id_count").to_pylist(),
            strict=True,
        )
    }


def _reconciles(
    definition: LakeAssetDef, lake: LakeResource, windows: Sequence[Window], _: frozenset[str]
) -> Iterator[tuple[int, dg.AssetCheckResult]]:
    """daily_sales agrees with the orders table it was computed from: each span of adjacent
    days reads both tables once, and every day of it is reported."""
    for span, members in spans(windows):
        orders = read(
            ORDERS_TABLE.spec,
            target_table(lake, ORDERS_TABLE.spec, ORDERS_TABLE.key),
            span,
            ORDERS_TABLE.arrow_schema,
        )
        sales = read(
            definition.spec,
            target_table(lake, definition.spec, definition.key),
            span,
            definition.arrow_schema,
        )
        expected = _totals_by_day(orders)
        stored = {row["order_date"]: (row["orders"], row["revenue"]) for row in sales.to_pylist()}
        for index in members:
            window = windows[index]
            days = set(window.days())
            yield (
                index,
                _reconciliation(
                    window,
                    {d: v for d, v in expected.items() if d in days},
                    {d: v for d, v in stored.items() if d in days},
                ),
            )


def _reconciliation(
    window: Window,
    expected: dict[object, tuple[int, decimal.Decimal]],
    stored: dict[object, tuple[int, decimal.Decimal]],
) -> dg.AssetCheckResult:
    mismatches = []
    for day in sorted(set(expected) | set(stored), key=str):
        want = expected.get(day, (0, decimal.Decimal("0")))
        have = stored.get(day)
        if have is None or have[0] != want[0] or have[1] != want[1]:
            mismatches.append(
                {
                    "day": str(day),
                    "orders_table": [want[0], str(want[1])],
                    "daily_sales": None if have is None else [have[0], str(have[1])],
                }
            )
    return dg.AssetCheckResult(
        check_name=RECONCILES_WITH_ORDERS,
        passed=not mismatches,
        metadata={
            "partition_range": window.label(),
            "days_compared": len(set(expected) | set(stored)),
            "mismatched_days": len(mismatches),
            "mismatches": dg.MetadataValue.json(mismatches[:20]),
        },
    )


RECONCILIATION = LakeCheck(
    names=(
        CheckName(
            RECONCILES_WITH_ORDERS,
            "Per day, daily_sales order count and revenue equal the sums over orders.",
        ),
    ),
    evaluate_windows=_reconciles,
    depends_on=(ORDERS_TABLE.key,),
)
