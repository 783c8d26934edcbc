"""The shipped TPC-H example's 31 days launched from the UI, against Dagster's trivial run.

What a user does after ``make run``: open the lineage, select the ``tpch`` group, click
**Materialize all…**, type the 31 days, **Launch backfill**, and wait for the backfill page
to say Succeeded. The UI is served as ``make run`` serves it (``python -m idem_assets.serve``:
webserver and daemon, the project's instance profile, backfills passed over every second),
in Debian's Chromium driven by Playwright. The same clicks then launch (a): three trivial
assets of the same partitions in a group of the same name (two daily with a single-run
backfill policy, one unpartitioned), no IO, no checks, served the same way.

Measured per contender: click → the last run of the backfill ended (the instance's end
time), click → the page shows Succeeded (the backfill page polls, so this moves in steps of
seconds), the runs' own time, and the events the runs stored.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from unittest.mock import patch

from benchmarks.harness import table

DAYS = 31
SCALE = 0.01  # make run's TPCH_SCALE
FIRST = dt.date(1992, 1, 1)
LAST = FIRST + dt.timedelta(days=DAYS - 1)
OURS, FLOOR = "ours: tpch group (3 tables)", "(a) three trivial assets"
FLOOR_MODULE = f"""\
import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="{FIRST}", timezone="UTC")
SINGLE = dg.BackfillPolicy.single_run()


class Nothing(dg.IOManager):
    def handle_output(self, context, obj): pass
    def load_input(self, context): return None


@dg.asset(partitions_def=DAILY, backfill_policy=SINGLE, group_name="tpch")
def trivial_orders() -> None:
    return None


@dg.asset(partitions_def=DAILY, backfill_policy=SINGLE, group_name="tpch")
def trivial_lineitem() -> None:
    return None


@dg.asset(group_name="tpch")
def trivial_customer() -> None:
    return None


defs = dg.Definitions(
    assets=[trivial_orders, trivial_lineitem, trivial_customer],
    resources={{"io_manager": Nothing()}},
    executor=dg.in_process_executor,
)
"""


def _launch(server: Any, location: str) -> tuple[float, float]:
    """The tpch group's lineage → Materialize all… → the 31 days → Launch backfill → the
    backfill page says Succeeded. (when Launch was clicked, when the page said so)."""
    from playwright.sync_api import expect

    from idem_assets_tests.ui.browser import choose_partitions, chromium_context, open_page
    from idem_assets_tests.ui.pages import backfill_status

    with chromium_context() as context:
        page = open_page(context)
        page.goto(f"{server.url}/locations/{location}/asset-groups/tpch")
        button = page.get_by_role("button", name="Materialize all…")
        expect(button).to_be_enabled()
        page.wait_for_load_state("networkidle")
        button.click()
        dialog = choose_partitions(page, f"[{FIRST}...{LAST}]")
        expect(dialog.get_by_text(f"{DAYS} partitions", exact=True)).to_be_visible()
        clicked = time.time()
        dialog.get_by_role("button", name="Launch backfill").click()
        page.get_by_role("link", name="View", exact=True).click()
        status = backfill_status(page)
        seen = time.time()
    if status != "Succeeded":
        raise AssertionError(f"the backfill ended {status}:\n{server.log_tail()}")
    return clicked, seen


def _runs(home: Path) -> tuple[float, float, Counter[str]]:
    """(first run's start, last run's end, events stored by type) of every run in ``home``."""
    import dagster as dg

    with patch.dict(os.environ, {"DAGSTER_HOME": str(home)}), dg.DagsterInstance.get() as instance:
        records = instance.get_run_records()
        kinds: Counter[str] = Counter()
        for record in records:
            for entry in instance.get_records_for_run(
                record.dagster_run.run_id, limit=10**6
            ).records:
                event = entry.event_log_entry.dagster_event
                if event is not None:
                    kinds[event.event_type_value] += 1
        starts = [r.start_time for r in records if r.start_time is not None]
        ends = [r.end_time for r in records if r.end_time is not None]
    return min(starts), max(ends), kinds


def one(name: str, work: Path, landing: Path) -> dict[str, Any]:
    """Serve, launch, measure one contender in a fresh instance and lake."""
    root = work / ("ours" if name == OURS else "floor")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if name == OURS:
        shutil.copytree(landing, root / "landing")
        workspace = Path(__file__).resolve().parents[2] / "workspace.yaml"
    else:
        (root / "floor.py").write_text(FLOOR_MODULE)
        workspace = root / "workspace.yaml"
        workspace.write_text(
            f"load_from:\n  - python_file:\n      relative_path: {root / 'floor.py'}\n"
            "      location_name: floor\n"
        )
    from idem_assets_tests.ui.server import start_dagster_dev

    server = start_dagster_dev(
        root, days=0, log_path=root / "serve.log", launcher="serve", workspace=workspace
    )
    try:
        clicked, seen = _launch(server, "idem_assets" if name == OURS else "floor")
    finally:
        server.stop()
    started, ended, kinds = _runs(root / "dagster_home")
    return {
        "click_to_end": ended - clicked,
        "click_to_page": seen - clicked,
        "runs": ended - started,
        "events": kinds,
    }


def run_family(repetitions: int) -> tuple[str, dict[str, Any]]:
    """The markdown section and the numbers for targets: ours and (a), alternating."""
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    samples: dict[str, list[dict[str, Any]]] = {OURS: [], FLOOR: []}
    try:
        landing = work / "landing"
        argv = ["tpch", "--out", str(landing), "--scale", f"{SCALE:g}", "--days", str(DAYS)]
        subprocess.run(
            [sys.executable, "-m", "idem_assets.sample", *argv], check=True, capture_output=True
        )
        for _ in range(repetitions):
            for name in (OURS, FLOOR):
                samples[name].append(one(name, work / "runs", landing))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {
        name: {
            key: statistics.median(s[key] for s in found)
            for key in ("click_to_end", "click_to_page", "runs")
        }
        for name, found in samples.items()
    }
    events = {name: found[-1]["events"] for name, found in samples.items()}
    numbers = {"medians": medians, "events": events, "load": (load_before, os.getloadavg()[0])}
    rows = [
        [
            name,
            medians[name]["click_to_end"],
            medians[name]["click_to_page"],
            medians[name]["runs"],
            sum(events[name].values()),
            events[name].get("ASSET_MATERIALIZATION", 0),
            events[name].get("ASSET_CHECK_EVALUATION", 0),
        ]
        for name in (OURS, FLOOR)
    ]
    ratio = medians[OURS]["click_to_end"] / medians[FLOOR]["click_to_end"]
    numbers["ratio"] = ratio
    load = numbers["load"]
    text = (
        f"{DAYS} days of the shipped TPC-H example (scale {SCALE:g}, as `make run` lays it "
        "out: tpch_orders, tpch_lineitem daily, tpch_customer a snapshot) launched from the UI "
        "as a user does after `make run` (lineage → the tpch group → Materialize all… → "
        f"`[{FIRST}...{LAST}]` → Launch backfill → the backfill page says Succeeded), in "
        "Debian's Chromium through Playwright, served by `python -m idem_assets.serve` on the "
        "project's instance profile; (a): three trivial assets of the same partitions in a "
        f"group of the same name, no IO, no checks, launched the same way. Samples: "
        f"{repetitions} each, alternating; load average (1 min) {load[0]:.2f} before, "
        f"{load[1]:.2f} after (code: `benchmarks/cases/ui_launch.py`).\n\n"
        + table(
            [
                "contender",
                "click → last run ended s",
                "click → page shows Succeeded s",
                "runs, first start → last end s",
                "events stored",
                "materializations",
                "check evaluations",
            ],
            rows,
        )
        + f"\n\nclick → last run ended: ours {ratio:.2f}× (a).\n"
    )
    return text, numbers
