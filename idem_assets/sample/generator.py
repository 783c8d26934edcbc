"""Deterministic synthetic landing data with the defects real feeds have (see docs/landing.md)."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idem_assets.landing import day_signature, read_days
from idem_assets.sample.sources import ORDERS, SOURCES
from idem_assets.sample.synthetic.catalog import plan_catalog
from idem_assets.sample.synthetic.common import Calendar, SourcePlan
from idem_assets.sample.synthetic.customers import plan_customers
from idem_assets.sample.synthetic.events import plan_events
from idem_assets.sample.synthetic.orders import next_status, plan_orders
from idem_assets.sample.writers import PlannedFile, file_bytes, write_atomically


@dataclass(frozen=True)
class GenerationSummary:
    """What generate() wrote: files and rows per source, and the defects planted."""

    out_dir: Path
    start: dt.date
    days: int
    seed: int
    scale: float
    clean: bool
    files: dict[str, int]
    rows: dict[str, int]
    defects: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the CLI and run metadata."""
        return {
            "out_dir": str(self.out_dir),
            "start": self.start.isoformat(),
            "days": self.days,
            "seed": self.seed,
            "scale": self.scale,
            "clean": self.clean,
            "files": self.files,
            "rows": self.rows,
            "defects": self.defects,
        }


def plan(
    start: dt.date, days: int, seed: int, *, clean: bool = False, scale: float = 1.0
) -> dict[str, SourcePlan]:
    """Every file of a simulation, per source, without writing anything."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    cal = Calendar(start, days, seed, scale, clean)
    customers, customers_by_day = plan_customers(cal)
    return {
        "orders": plan_orders(cal, customers_by_day),
        "customers": customers,
        "events": plan_events(cal, customers_by_day),
        "product_catalog": plan_catalog(cal),
    }


def generate(
    out_dir: str | Path,
    start: dt.date,
    days: int,
    seed: int,
    *,
    clean: bool = False,
    scale: float = 1.0,
) -> GenerationSummary:
    """Write ``days`` days of every source under ``out_dir``; same inputs, same bytes.

    ``clean`` leaves out the rows planted for quarantine. Files have fixed names, so a
    rerun rewrites identical files; nothing else in ``out_dir`` is touched or deleted.
    """
    root = Path(out_dir)
    plans = plan(start, days, seed, clean=clean, scale=scale)
    for source, source_plan in plans.items():
        for planned_file in source_plan.files:
            data = file_bytes(planned_file, SOURCES[source])
            write_atomically(root / planned_file.relpath, data)
    defects: dict[str, int] = {}
    for source_plan in plans.values():
        defects.update(source_plan.defects)
    return GenerationSummary(
        out_dir=root,
        start=start,
        days=days,
        seed=seed,
        scale=scale,
        clean=clean,
        files={s: len(p.files) for s, p in plans.items()},
        rows={s: p.rows for s, p in plans.items()},
        defects=dict(sorted(defects.items())),
    )


def write_late_orders(landing_dir: str | Path, day: dt.date, seed: int, n: int) -> Path:
    """Add one file to ``day``'s orders folder with newer versions of ``n`` of its orders.

    The file name and content derive from the folder's current signature and ``seed``,
    so the same call on the same folder writes the same file, and each further call adds
    another, newer one.
    """
    import polars as pl  # here, not at import: see idem_assets._lazy

    signature = day_signature(landing_dir, ORDERS, day)
    if signature is None:
        raise ValueError(f"no orders files for {day} under {landing_dir}: nothing to update")
    batch = read_days(landing_dir, ORDERS, day, day + dt.timedelta(days=1))
    rows = pl.from_arrow(batch.rows)
    assert isinstance(rows, pl.DataFrame)
    newest = rows.sort("updated_at", "order_id").unique("order_id", keep="last").sort("order_id")
    if n < 1 or n > newest.height:
        raise ValueError(f"n must be between 1 and {newest.height} (orders of {day}), got {n}")
    rng = random.Random(f"idem-assets/late-orders/{seed}/{signature}")
    base = rows.get_column("updated_at").max()
    assert isinstance(base, dt.datetime)
    picked = sorted(rng.sample(range(newest.height), n))
    late_rows = []
    for offset, index in enumerate(picked):
        row = newest.row(index, named=True)
        moved_at = base + dt.timedelta(hours=1, seconds=offset)
        late_rows.append({**row, "status": next_status(row["status"], rng), "updated_at": moved_at})
    relpath = f"orders/date={day.isoformat()}/late-extra-{signature[:12]}.csv"
    planned_file = PlannedFile(relpath, tuple(ORDERS.columns), tuple(late_rows))
    path = Path(landing_dir) / relpath
    write_atomically(path, file_bytes(planned_file, ORDERS))
    return path
