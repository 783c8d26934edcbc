"""Erasure: the files ``idem-assets erase`` reports as holding a key, against a Parquet scan.

A CDC export (30 days of upserts and about 10% deletes of 60 customers, versions across
days) declared twice as in docs/landing.md: ``crm_customers`` (merge with a delete marker,
``change_data_feed: true``, tombstones) and ``crm_customer_history`` (SCD2 history, its
deletes kept beside it), both with ``erasable_keys: [customer_id]``. Every day is loaded in
a random order, then 5 days again (reruns), one run per day through Dagster; then the
customer with the most change rows is erased with the command's own function.

Printed: the files the erase reports per table, the files a scan of every Parquet file
under the lake finds holding the key (both by table folder), the report's cost (files
scanned, ruled out by statistics, read, seconds) against that full scan's, and after
``--vacuum-now`` what each finds. ``python -m benchmarks.cases.erasure [--days N]``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

START = dt.date(2024, 3, 1)
KEY, VERSION, OP, KEYS = "customer_id", "updated_at", "op", 60
COLUMNS = [
    {"name": KEY, "type": "int64"},
    {"name": VERSION, "type": "int64"},
    {"name": "segment", "type": "string"},
    {"name": OP, "type": "string"},
]
SOURCES = (
    {"name": "crm_customers", "strategy": "merge", "change_data_feed": True},
    {"name": "crm_customer_history", "strategy": "history", "layout": "crm_customers/date={date}"},
)


def lay_out(landing: Path, days: int, seed: int) -> list[list[dict]]:
    """One CSV change set per day folder; the rows too."""
    rng = random.Random(seed)
    out = []
    for day in range(days):
        rows = [
            {
                KEY: rng.randrange(KEYS),
                VERSION: day * 100 + rng.randrange(150),
                "segment": rng.choice(["smb", "consumer", "enterprise"]),
                OP: "D" if rng.random() < 0.1 else "U",
            }
            for _ in range(rng.randint(5, 25))
        ]
        folder = landing / "crm_customers" / f"date={START + dt.timedelta(days=day)}"
        folder.mkdir(parents=True)
        with (folder / "changes.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=[KEY, VERSION, "segment", OP])
            writer.writeheader()
            writer.writerows(rows)
        out.append(rows)
    return out


def declarations() -> list:
    """The two declared sources."""
    from idem_assets.sources.load import declaration_from_mapping

    return [
        declaration_from_mapping(
            {
                "first_day": START.isoformat(),
                "columns": COLUMNS,
                "natural_key": [KEY],
                "version": VERSION,
                "delete_marker": {"column": OP, "value": "D"},
                "erasable_keys": [KEY],
                **extra,
            },
            "erasure",
        )
        for extra in SOURCES
    ]


def parquet_scan(lake: Path, value: int) -> tuple[Counter, float]:
    """Files holding ``value`` in ``customer_id`` by table folder, reading every Parquet file."""
    import pyarrow.parquet as pq

    started = time.perf_counter()
    found: Counter = Counter()
    for path in lake.rglob("*.parquet"):
        if "_delta_log" in path.parts:
            continue
        rows = pq.read_table(path)
        if KEY in rows.column_names and value in rows.column(KEY).to_pylist():
            found[path.relative_to(lake).parts[0]] += 1
    return found, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=43)
    args = parser.parse_args(argv)
    import dagster as dg

    from idem_assets.cli.erase import erase, vacuum_now
    from idem_assets.io_manager.erasure import erasable_tables
    from idem_assets.lib import default_resources, source_definitions
    from idem_assets.resources import CheckpointResource, LakeResource

    root = Path(tempfile.mkdtemp(prefix="erasure-bench-"))
    landing = root / "landing"
    days = lay_out(landing, args.days, args.seed)
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(root / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{root / 'state.db'}")
    resources = default_resources(lake, checkpoint)
    defs = dg.Definitions.merge(
        *(source_definitions(s) for s in declarations()), dg.Definitions(resources=resources)
    )
    job = dg.Definitions.merge(
        defs, dg.Definitions(jobs=[dg.define_asset_job("load", selection="*")])
    ).resolve_job_def("load")
    instance = dg.DagsterInstance.ephemeral()
    rng = random.Random(args.seed)
    order = rng.sample(range(args.days), args.days) + rng.sample(range(args.days), 5)
    for index in order:
        key = (START + dt.timedelta(days=index)).isoformat()
        job.execute_in_process(partition_key=key, instance=instance)
    counts = Counter(row[KEY] for rows in days for row in rows)
    customer = counts.most_common(1)[0][0]
    declared = erasable_tables(defs)
    before, _ = parquet_scan(root / "lake", customer)
    started = time.perf_counter()
    with checkpoint.open() as store:
        done = erase(lake, store, declared, KEY, str(customer))
    erase_seconds = time.perf_counter() - started
    found, full_seconds = parquet_scan(root / "lake", customer)
    reported = Counter({name: len(s.held) for name, s in done.scan.tables.items() if s.held})
    print(f"Erasure of one customer after {len(order)} loads of {args.days} days ({root})\n")
    print("| table | files before the erase | reported by erase | found by a Parquet scan |")
    print("|---|---:|---:|---:|")
    for name in sorted(set(found) | set(reported) | set(before)):
        print(f"| {name} | {before[name]} | {reported[name]} | {found[name]} |")
    scanned = sum(s.files for s in done.scan.tables.values())
    ruled = sum(s.by_statistics for s in done.scan.tables.values())
    read = sum(s.read for s in done.scan.tables.values())
    print(
        f"\nerase (deletes and scan) {erase_seconds:.2f} s: {scanned} files scanned, {ruled} "
        f"ruled out by statistics, {read} read; the full Parquet scan {full_seconds:.2f} s"
    )
    with checkpoint.open() as store:
        now = vacuum_now(lake, store, declared)
    after, _ = parquet_scan(root / "lake", customer)
    left = sum(len(s.held) for s in now.scan.tables.values())
    print(f"after --vacuum-now: reported {left}, found by the Parquet scan {sum(after.values())}")
    return 0 if reported == found and not after and not left else 1


if __name__ == "__main__":
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="erasure-home-"))
    sys.exit(main())
