"""Simulated orders: daily orders, same-folder re-deliveries, late files into old folders."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from idem_assets.sample.sources import ORDERS
from idem_assets.sample.synthetic.common import (
    Calendar,
    SourcePlan,
    at,
    money,
    planned,
    share,
    some_micros,
)

CHANNELS = ("web", "app", "store")
UNKNOWN_STATUS = "lost"
LATE_FILE_LAG_DAYS = 3
_NEXT_STATUS = {
    "placed": "paid",
    "paid": "shipped",
    "shipped": "delivered",
    "delivered": "refunded",
}


def next_status(status: str, rng: random.Random) -> str:
    """The status an order moves to next (placed orders are sometimes cancelled)."""
    if status == "placed" and rng.random() < 0.1:
        return "cancelled"
    return _NEXT_STATUS.get(status, status)


def _columns(with_channel: bool) -> tuple[str, ...]:
    return (*ORDERS.columns, "channel") if with_channel else tuple(ORDERS.columns)


def _new_order(
    order_id: int, day: dt.date, customers: list[int], rng: random.Random
) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "customer_id": rng.choice(customers),
        "amount": money(rng.randint(500, 50_000)),
        "status": "placed" if rng.random() < 0.7 else "paid",
        "order_date": day,
        "updated_at": at(day, rng.randint(0, 16 * 3600), some_micros(rng)),
        "channel": rng.choice(CHANNELS),
    }


def _moved(row: dict[str, Any], updated_at: dt.datetime, rng: random.Random) -> dict[str, Any]:
    return {**row, "status": next_status(row["status"], rng), "updated_at": updated_at}


def _defects(
    k: int, day: dt.date, first_id: int, customers: list[int], rng: random.Random, plan: SourcePlan
) -> list[dict[str, Any]]:
    """A handful of odd rows: an unknown status and a negative amount, which load and are
    flagged by the declaration's WARN value rules, and a row without a version (its
    updated_at is missing), which cannot be ordered and is quarantined."""
    rows = []
    if k % 5 == 0:
        row = _new_order(first_id, day, customers, rng)
        rows.append({**row, "status": UNKNOWN_STATUS})
        plan.defects["orders_unknown_status"] += 1
    if k % 5 == 1:
        row = _new_order(first_id, day, customers, rng)
        rows.append({**row, "amount": money(-rng.randint(100, 5_000))})
        plan.defects["orders_negative_amount"] += 1
    if k % 5 == 2:
        row = _new_order(first_id, day, customers, rng)
        rows.append({**row, "updated_at": None})
        plan.defects["orders_missing_version"] += 1
    return rows


def plan_orders(cal: Calendar, customers_by_day: list[list[int]]) -> SourcePlan:
    """Every orders file of the simulation, day by day."""
    rng = cal.rng("orders")
    plan = SourcePlan()
    latest: dict[int, dict[str, Any]] = {}
    ids_by_day: list[list[int]] = []
    next_id = 100_001
    for k, day in enumerate(cal.dates):
        folder = f"orders/date={day.isoformat()}"
        new = []
        for _ in range(cal.count(300)):
            new.append(_new_order(next_id, day, customers_by_day[k], rng))
            next_id += 1
        latest.update((row["order_id"], row) for row in new)
        ids_by_day.append([row["order_id"] for row in new])
        bad = [] if cal.clean else _defects(k, day, next_id, customers_by_day[k], rng, plan)
        next_id += len(bad)
        redelivered = []
        for row in rng.sample(new, share(len(new), 0.1)):
            later = row["updated_at"] + dt.timedelta(seconds=rng.randint(600, 4 * 3600))
            redelivered.append(_moved(row, later, rng))
        latest.update((row["order_id"], row) for row in redelivered)
        duplicates = rng.sample(new, share(len(new), 0.02))
        half = len(new) // 2
        files = [
            (new[:half] + bad, "part-000"),
            (new[half:], "part-001"),
            (redelivered + duplicates, "part-002"),
        ]
        for index, (rows, name) in enumerate(files):
            plan.files.append(
                planned(f"{folder}/{name}", _columns((k + index) % 2 == 0), rows, k, index)
            )
        plan.defects["orders_redelivered"] += len(redelivered)
        plan.defects["orders_exact_duplicates"] += len(duplicates)
        if k >= LATE_FILE_LAG_DAYS:
            _late_file(cal, k, day, ids_by_day[k - LATE_FILE_LAG_DAYS], latest, rng, plan)
    plan.defects["orders_extra_column_files"] = sum("channel" in f.columns for f in plan.files)
    return plan


def _late_file(
    cal: Calendar,
    k: int,
    day: dt.date,
    old_ids: list[int],
    latest: dict[int, dict[str, Any]],
    rng: random.Random,
    plan: SourcePlan,
) -> None:
    """Updates delivered today into the folder of the day the orders were placed."""
    old_day = cal.dates[k - LATE_FILE_LAG_DAYS]
    rows = []
    for order_id in sorted(rng.sample(old_ids, share(len(old_ids), 0.05))):
        row = _moved(latest[order_id], at(day, rng.randint(0, 20 * 3600), some_micros(rng)), rng)
        latest[order_id] = row
        rows.append(row)
    relpath = f"orders/date={old_day.isoformat()}/late-{day.isoformat()}"
    plan.files.append(planned(relpath, _columns(False), rows, k, 3))
    plan.defects["orders_late_files"] += 1
    plan.defects["orders_late_updates"] += len(rows)
