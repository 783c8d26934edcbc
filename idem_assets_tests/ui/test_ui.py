"""The UI as people use it: Debian's Chromium against `dagster dev`, clicking what a user clicks."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from deltalake import write_deltalake
from playwright.sync_api import Page, expect

from idem_assets.definitions import defs
from idem_assets.defs.automation.jobs import DAILY_ASSETS
from idem_assets.lake import LakeTable, read_rows
from idem_assets.lake.predicates import conjunction, date_range
from idem_assets_tests.ui.browser import choose_partitions
from idem_assets_tests.ui.conftest import Snap, record_launch
from idem_assets_tests.ui.pages import (
    backfill_rows,
    backfill_status,
    check_evaluation_metadata,
    check_lines_of_run,
    check_partition_counts,
    check_partition_detail,
    check_partition_statuses,
    filter_graph,
    latest_materialization,
    launch_one_partition,
    open_asset_from_graph,
    scroll_to_metadata_row,
    wait_for_run_success,
)
from idem_assets_tests.ui.server import ROOT, DagsterDev, dagster_dev_env

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1200)]

# Disjoint days, so the two tests can share one server in any order.
RERUN_DAY = "2024-03-04"
BACKFILL_DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
# The generator plants an unknown status on 03-01 and a negative amount on 03-02: those rows
# load, and the orders' WARN value rules report them (one check for both rules).
WARNED = {("orders", "value_rules")}
CHECK_COMMAND = Path(sys.executable).with_name("idem-assets")  # installed with the package


def _checks_of(asset_names: set[str]) -> set[tuple[str, str]]:
    """(asset, check) pairs the code location declares for these assets."""
    graph = defs.resolve_asset_graph()
    return {
        (key.asset_key.to_user_string(), key.name)
        for key in graph.asset_check_keys
        if key.asset_key.to_user_string() in asset_names
    }


def test_materializing_one_orders_partition_twice_from_the_ui_keeps_its_fingerprint(
    dagster_ui: DagsterDev, page: Page, snap: Snap
) -> None:
    open_asset_from_graph(page, dagster_ui, "orders", snap)
    expect(page.get_by_role("tab", name="Checks")).to_be_visible()
    snap("orders-asset")
    expected_checks = {(asset, check, "succeeded") for asset, check in _checks_of({"orders"})}
    assert {
        ("orders", "rerun_equality", "succeeded"),
        ("orders", "unique_natural_key", "succeeded"),
    } <= expected_checks

    first_run, clicked = launch_one_partition(page, RERUN_DAY)
    expect(page.get_by_text(f"partition: {RERUN_DAY}")).to_be_visible()
    wait_for_run_success(page)
    record_launch("one partition", clicked, time.time(), dagster_ui.run_times(first_run))
    assert check_lines_of_run(page, len(expected_checks)) == expected_checks
    snap("first-run-checks")
    first = latest_materialization(page, dagster_ui, "orders")
    assert first["header"] == f"Partition {RERUN_DAY} materialized in run {first_run[:8]}"
    assert first["committed"] == "true"
    assert first["partition_range"] == f"[{RERUN_DAY}, 2024-03-05)"
    snap("first-materialization")
    table = LakeTable(str(dagster_ui.lake_dir / "orders")).open()
    assert table is not None and str(table.version()) == first["delta_version"]

    page.get_by_role("tab", name="Checks").click()
    for check in ("rerun_equality", "unique_natural_key"):
        page.get_by_text(check, exact=True).first.click()
        expect(page.get_by_text("Passed", exact=True).first).to_be_visible()
    snap("checks-tab")

    second_run, clicked = launch_one_partition(page, RERUN_DAY)
    assert second_run != first_run
    wait_for_run_success(page)
    record_launch("one partition, rerun", clicked, time.time(), dagster_ui.run_times(second_run))
    assert check_lines_of_run(page, len(expected_checks)) == expected_checks
    second = latest_materialization(page, dagster_ui, "orders")
    assert second["header"] == f"Partition {RERUN_DAY} materialized in run {second_run[:8]}"
    assert second["committed"] == "false"
    assert second["fingerprint"] == first["fingerprint"]
    assert second["delta_version"] == first["delta_version"]
    scroll_to_metadata_row(page, "strategy")  # the write's metadata, below the landing's
    snap("rerun-materialization")

    # Each run evaluated every check for its partition.
    for run_id in (first_run, second_run):
        evaluations = dagster_ui.check_evaluations(run_id)
        assert set(evaluations) == {(a, c, RERUN_DAY) for a, c, _ in expected_checks}
        assert all(evaluations.values()), evaluations
    table = LakeTable(str(dagster_ui.lake_dir / "orders")).open()
    assert table is not None and str(table.version()) == first["delta_version"]


def _corrupt_one_row(server: DagsterDev, day: str) -> None:
    """Add 1 to one order's amount on ``day``, written with delta-rs behind the lake's back."""
    table = LakeTable(str(server.lake_dir / "orders")).open()
    assert table is not None
    start = dt.date.fromisoformat(day)
    window = date_range("order_date", start, start + dt.timedelta(days=1))
    rows = read_rows(table, ranges=[window])
    amounts = rows.column("amount").to_pylist()
    amounts[0] = amounts[0] + 1
    changed = rows.set_column(
        rows.schema.get_field_index("amount"),
        "amount",
        pa.array(amounts, rows.schema.field("amount").type),
    )
    write_deltalake(table, changed, mode="overwrite", predicate=conjunction([window]))


def _check_command(server: DagsterDev, *args: str) -> subprocess.CompletedProcess[str]:
    """`idem-assets check` as CI runs it, from the project root, on the server's instance."""
    return subprocess.run(
        [str(CHECK_COMMAND), "check", *args],
        cwd=ROOT,
        env=dagster_dev_env(server.root),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_three_day_backfill_from_the_asset_graph_materializes_every_partition_with_its_checks(
    dagster_ui: DagsterDev, page: Page, snap: Snap, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets = set(DAILY_ASSETS)
    page.goto(dagster_ui.url)
    page.get_by_role("link", name=re.compile(r"\bLineage$")).click()
    filter_graph(page, " or ".join(f'key:"{asset}"' for asset in sorted(assets)))
    for asset in assets:
        expect(page.locator(f'[data-tooltip="{asset}"]')).to_be_visible()
    page.get_by_role("button", name="Materialize all…").click()
    dialog = choose_partitions(page, f"[{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}]")
    expect(dialog.get_by_text(f"{len(BACKFILL_DAYS)} partitions", exact=True)).to_be_visible()
    snap("launch-backfill")
    clicked = time.time()
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_text(re.compile(r"^Created backfill"))).to_be_visible()
    page.get_by_role("link", name="View", exact=True).click()

    assert backfill_status(page) == "Succeeded"
    backfill_seen = time.time()
    expect(page.get_by_text("100% completed")).to_have_count(len(assets))
    days = len(BACKFILL_DAYS)
    assert backfill_rows(page, assets) == {asset: (days, 0, days, 0) for asset in assets}
    snap("backfill-succeeded")

    # A single-run backfill policy: the whole range is one run.
    page.get_by_role("tab", name="Runs").click()
    run_links = page.get_by_role("link", name=re.compile(r"\b[0-9a-f]{8}$"))
    expect(run_links).to_have_count(1)
    run_link = run_links.first.get_attribute("href") or ""
    assert re.fullmatch(r"/runs/[0-9a-f-]{36}", run_link), run_link
    run_links.first.click()
    wait_for_run_success(page)
    record_launch(
        f"{days}-day backfill",
        clicked,
        backfill_seen,
        dagster_ui.run_times(run_link.rsplit("/", 1)[-1]),
    )
    # One evaluation per check and day: a WARN rule fails on the day its row was planted.
    expected = {(asset, check, "succeeded") for asset, check in _checks_of(assets)} | {
        (asset, check, "failed") for asset, check in WARNED
    }
    assert check_lines_of_run(page, len(expected)) == expected
    snap("backfill-run-checks")

    for asset in sorted(assets):
        page.goto(f"{dagster_ui.url}/assets/{asset}")
        page.get_by_role("tab", name="Partitions").first.click()
        selection = page.get_by_placeholder(re.compile(r"^ex: "))
        selection.fill(f"[{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}]")
        selection.press("Enter")
        expect(page.get_by_text(f"{days} Partitions Selected")).to_be_visible()
        for label in (f"Materialized ({days})", "Failed (0)", "Missing (0)", "Materializing (0)"):
            expect(page.get_by_text(label, exact=True)).to_be_visible()
        snap(f"{asset}-partitions")

    page.goto(dagster_ui.url)
    page.get_by_role("link", name=re.compile(r"\bLineage$")).click()
    filter_graph(page, 'group:"lake"')
    expect(page.locator('[data-tooltip="daily_sales"]')).to_be_visible()
    snap("lake-graph")

    # The ranged run evaluated every check for each of its days: all passed but the two
    # planted warnings, each on its own day.
    run_id = run_link.rsplit("/", 1)[-1]
    evaluations = dagster_ui.check_evaluations(run_id)
    assert set(evaluations) == {(a, c, day) for a, c in _checks_of(assets) for day in BACKFILL_DAYS}
    assert {key for key, passed in evaluations.items() if not passed} == {
        ("orders", "value_rules", BACKFILL_DAYS[0]),
        ("orders", "value_rules", BACKFILL_DAYS[1]),
    }

    # A row changed behind the lake's back on the middle day: CI's check command turns that
    # day red and only that day, and records it in the instance the UI reads.
    bad_day = BACKFILL_DAYS[1]
    _corrupt_one_row(dagster_ui, bad_day)
    done = _check_command(
        dagster_ui,
        "--select",
        "orders",
        "--partition-range",
        f"{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}",
    )
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert "1 ERROR failed" in done.stdout
    equality = {
        line.split()[1]: line
        for line in done.stdout.splitlines()
        if line.split()[:1] == ["orders"] and line.split()[2:3] == ["rerun_equality"]
    }
    assert set(equality) == set(BACKFILL_DAYS), done.stdout
    assert equality[bad_day].split()[3] == "NO" and "rows_differing=2" in equality[bad_day]
    assert all(equality[day].split()[3] == "yes" for day in BACKFILL_DAYS if day != bad_day)

    # The check's Execution history: the newest result of each day, one of them red.
    outcome = {day: "Failed" if day == bad_day else "Passed" for day in BACKFILL_DAYS}
    statuses = check_partition_statuses(page, dagster_ui, "orders", "rerun_equality")
    assert {day: statuses.get(day) for day in BACKFILL_DAYS} == outcome, statuses
    snap("check-execution-history")
    failed = check_evaluation_metadata(page, bad_day)
    assert failed["rows_differing"] == "2"
    assert bad_day in failed["description"], failed
    # The check's Partitions tab: each day's latest result, description and metadata (the
    # red day last, for the screenshot).
    for day in [day for day in BACKFILL_DAYS if day != bad_day] + [bad_day]:
        detail = check_partition_detail(page, day)
        assert detail["result"] == outcome[day], detail
        assert detail["rows_differing"] == ("2" if day == bad_day else "0"), detail
        assert day in detail["description"], detail
    snap("corrupted-day-check")
    # Its status bar and counters: each evaluation names the materialization it checked, so
    # the days are Passed / Failed, not Missing.
    counts = check_partition_counts(page, f"[{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}]")
    assert (counts.get("Passed"), counts.get("Failed"), counts.get("Missing")) == (2, 1, 0), counts
    snap("corrupted-day-partitions")

    # The stored state agrees: the newest execution of each day, red for the changed one.
    # The instance profile (dagster.yaml) reads its storage folder from DAGSTER_HOME.
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_ui.root / "dagster_home"))
    with dg.DagsterInstance.from_config(str(dagster_ui.root / "dagster_home")) as instance:
        records = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("orders"), "rerun_equality"), limit=50
        )
    latest = {}
    for record in sorted(records, key=lambda r: r.id):  # insert order; timestamps can tie
        latest[record.partition] = record.status
    expected_status = {
        day: AssetCheckExecutionRecordStatus.FAILED
        if day == bad_day
        else AssetCheckExecutionRecordStatus.SUCCEEDED
        for day in BACKFILL_DAYS
    }
    assert {day: latest.get(day) for day in BACKFILL_DAYS} == expected_status
