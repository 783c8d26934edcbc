"""Simulated product catalog: a full CSV snapshot every 7 days with price changes."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from idem_assets.sample.sources import PRODUCT_CATALOG
from idem_assets.sample.synthetic.common import Calendar, SourcePlan, money, share
from idem_assets.sample.writers import PlannedFile

SNAPSHOT_EVERY_DAYS = 7
CATEGORIES = ("books", "garden", "kitchen", "outdoor", "toys")
ADJECTIVES = ("Compact", "Classic", "Sturdy", "Bright", "Quiet", "Swift", "Tiny", "Grand")
NOUNS = ("Lamp", "Kettle", "Backpack", "Puzzle", "Planter", "Notebook", "Tent", "Chair")


def _product(product_id: int, rng: random.Random) -> dict[str, Any]:
    return {
        "product_id": product_id,
        "name": f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {product_id}",
        "category": rng.choice(CATEGORIES),
        "price": money(rng.randint(199, 49_999)),
    }


def snapshot_name(day: dt.date) -> str:
    """The file name of the snapshot taken on ``day``; names sort in time order."""
    return f"catalog-{day.isoformat()}.csv"


def plan_catalog(cal: Calendar) -> SourcePlan:
    """One snapshot file every SNAPSHOT_EVERY_DAYS days, starting on the first day."""
    rng = cal.rng("product_catalog")
    plan = SourcePlan()
    products: dict[int, dict[str, Any]] = {}
    for k, day in enumerate(cal.dates):
        if k % SNAPSHOT_EVERY_DAYS:
            continue
        if not products:
            products = {i: _product(i, rng) for i in range(1, cal.count(50, minimum=3) + 1)}
        else:
            for product_id in sorted(rng.sample(sorted(products), share(len(products), 0.1))):
                product = products[product_id]
                products[product_id] = {**product, "price": money(rng.randint(199, 49_999))}
                plan.defects["catalog_price_changes"] += 1
            first_new = max(products) + 1
            for product_id in range(first_new, first_new + cal.count(2)):
                products[product_id] = _product(product_id, rng)
                plan.defects["catalog_new_products"] += 1
        rows = tuple(products[i] for i in sorted(products))
        relpath = f"product_catalog/{snapshot_name(day)}"
        plan.files.append(PlannedFile(relpath, tuple(PRODUCT_CATALOG.columns), rows))
        plan.defects["catalog_snapshots"] += 1
    return plan
