"""Simulated customers: an initial load, then daily change sets with one late older change."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from idem_assets.sample.sources import CUSTOMERS
from idem_assets.sample.synthetic.common import Calendar, SourcePlan, at, planned, share

FIRST_NAMES = (
    "Ada",
    "Bela",
    "Chen",
    "Dana",
    "Emil",
    "Fatma",
    "Goran",
    "Hana",
    "Ivo",
    "Jana",
    "Kofi",
    "Lena",
    "Mika",
    "Nora",
    "Omar",
    "Pia",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
)
LAST_NAMES = (
    "Novak",
    "Okafor",
    "Berg",
    "Silva",
    "Kowalski",
    "Haddad",
    "Larsen",
    "Moreau",
    "Yilmaz",
    "Tanaka",
    "Weber",
    "Costa",
    "Fischer",
    "Ito",
    "Dubois",
    "Ramos",
)
SEGMENTS = ("consumer", "consumer", "consumer", "smb", "smb", "enterprise")


def _person(customer_id: int, rng: random.Random) -> dict[str, Any]:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    return {
        "customer_id": customer_id,
        "name": f"{first} {last}",
        "email": f"{first}.{last}.{customer_id}@example.com".lower(),
        "segment": rng.choice(SEGMENTS),
    }


def _changed(row: dict[str, Any], updated_at: dt.datetime, rng: random.Random) -> dict[str, Any]:
    field = rng.choice(("email", "segment", "name"))
    changed = {**row, "updated_at": updated_at}
    if field == "email":
        changed["email"] = f"{row['customer_id']}.{rng.randint(100, 999)}@example.org"
    elif field == "segment":
        changed["segment"] = rng.choice([s for s in SEGMENTS if s != row["segment"]])
    else:
        changed["name"] = f"{row['name'].split()[0]} {rng.choice(LAST_NAMES)}"
    return changed


def plan_customers(cal: Calendar) -> tuple[SourcePlan, list[list[int]]]:
    """Every customers file, plus the customer ids that exist on each day."""
    rng = cal.rng("customers")
    plan = SourcePlan()
    current: dict[int, dict[str, Any]] = {}
    changed_yesterday: list[int] = []
    ids_by_day: list[list[int]] = []
    columns = tuple(CUSTOMERS.columns)
    for k, day in enumerate(cal.dates):
        folder = f"customers/date={day.isoformat()}"
        if k == 0:
            rows = [
                {**_person(i, rng), "updated_at": at(day, rng.randint(0, 8 * 3600))}
                for i in range(1, cal.count(400) + 1)
            ]
            current.update((r["customer_id"], r) for r in rows)
            half = len(rows) // 2
            plan.files.append(planned(f"{folder}/part-000", columns, rows[:half], k, 0))
            plan.files.append(planned(f"{folder}/part-001", columns, rows[half:], k, 1))
            ids_by_day.append(sorted(current))
            continue
        changes = [
            _changed(current[i], at(day, rng.randint(3600, 20 * 3600)), rng)
            for i in sorted(rng.sample(sorted(current), share(len(current), 0.05)))
        ]
        first_new = max(current) + 1
        arrivals = [
            {**_person(i, rng), "updated_at": at(day, rng.randint(0, 20 * 3600))}
            for i in range(first_new, first_new + cal.count(10))
        ]
        stale = []
        if changed_yesterday:
            # Delivered today but written before yesterday's change: it must not win.
            stale_id = rng.choice(changed_yesterday)
            newer = current[stale_id]
            older_at = newer["updated_at"] - dt.timedelta(hours=rng.randint(1, 3))
            stale.append(
                {**newer, "email": f"stale.{stale_id}@example.net", "updated_at": older_at}
            )
        current.update((r["customer_id"], r) for r in changes + arrivals)
        changed_yesterday = [r["customer_id"] for r in changes]
        plan.defects["customers_changes"] += len(changes)
        plan.defects["customers_new"] += len(arrivals)
        plan.defects["customers_late_older_changes"] += len(stale)
        rows = changes + arrivals + stale
        plan.files.append(planned(f"{folder}/part-000", columns, rows, k, 0))
        ids_by_day.append(sorted(current))
    return plan, ids_by_day
