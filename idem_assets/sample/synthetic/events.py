"""Simulated events: a day's events (a few late from the day before) and re-ingested ones."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from typing import Any

from idem_assets.sample.sources import EVENTS
from idem_assets.sample.synthetic.common import Calendar, SourcePlan, at, planned, share

EVENT_NAMESPACE = uuid.UUID("6f1c2a5e-4b7d-4c1e-9a55-2d8f0c3b7e11")
EVENT_TYPES = ("page_view",) * 6 + ("add_to_cart",) * 2 + ("checkout", "purchase", "support_ticket")


def event_id(seed: int, day: dt.date, index: int) -> str:
    """A stable id for the index-th event of a day in a seeded run."""
    return str(uuid.uuid5(EVENT_NAMESPACE, f"{seed}/{day.isoformat()}/{index}"))


def _payload(event_type: str, rng: random.Random) -> str:
    body: dict[str, Any] = {
        "page": f"/products/{rng.randint(1, 80)}",
        "session": f"s{rng.randint(10_000, 99_999)}",
    }
    if event_type == "purchase":
        body["value"] = f"{rng.randint(5, 500)}.{rng.randint(0, 99):02d}"
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def _event(
    cal: Calendar, day: dt.date, index: int, customers: list[int], rng: random.Random
) -> tuple[dict[str, Any], bool]:
    late = rng.random() < 0.03
    if late:
        event_time = at(day - dt.timedelta(days=1), rng.randint(22 * 3600, 24 * 3600 - 1))
        ingested_at = at(day, rng.randint(0, 2 * 3600))
    else:
        event_time = at(day, rng.randint(0, 22 * 3600), rng.randrange(1_000_000))
        ingested_at = event_time + dt.timedelta(seconds=rng.randint(1, 1800))
    kind = rng.choice(EVENT_TYPES)
    row = {
        "event_id": event_id(cal.seed, day, index),
        "customer_id": rng.choice(customers),
        "event_type": kind,
        "event_time": event_time,
        "ingested_at": ingested_at,
        "payload": _payload(kind, rng),
    }
    return row, late


def plan_events(cal: Calendar, customers_by_day: list[list[int]]) -> SourcePlan:
    """Every events file of the simulation, day by day."""
    rng = cal.rng("events")
    plan = SourcePlan()
    columns = tuple(EVENTS.columns)
    yesterday: list[dict[str, Any]] = []
    for k, day in enumerate(cal.dates):
        rows = []
        for index in range(cal.count(1000)):
            row, late = _event(cal, day, index, customers_by_day[k], rng)
            rows.append(row)
            plan.defects["events_late"] += late
        again = (
            [
                {**row, "ingested_at": at(day, rng.randint(0, 4 * 3600))}
                for row in rng.sample(yesterday, share(len(yesterday), 0.05))
            ]
            if yesterday
            else []
        )
        plan.defects["events_reingested"] += len(again)
        folder = f"events/date={day.isoformat()}"
        half = len(rows) // 2
        plan.files.append(planned(f"{folder}/part-000", columns, rows[:half], k, 0))
        plan.files.append(planned(f"{folder}/part-001", columns, rows[half:] + again, k, 1))
        yesterday = rows
    return plan
