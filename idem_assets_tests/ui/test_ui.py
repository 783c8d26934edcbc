"""The UI as people use it: Debian's Chromium against `dagster dev`, clicking what a user clicks."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from idem_assets.definitions import defs
from idem_assets.defs.automation.jobs import DAILY_ASSETS
from idem_assets.lake import LakeTable
from idem_assets_tests.ui.browser import choose_partitions
from idem_assets_tests.ui.conftest import Snap
from idem_assets_tests.ui.pages import (
    backfill_rows,
    backfill_status,
    check_lines_of_run,
    filter_graph,
    latest_materialization,
    launch_one_partition,
    open_asset_from_graph,
    scroll_to_metadata_row,
    wait_for_run_success,
)
from idem_assets_tests.ui.server import DagsterDev

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1200)]

# Disjoint days, so the two tests can share one server in any order.
RERUN_DAY = "2024-03-04"
BACKFILL_DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
# The generator plants an unknown status on 03-01 and a negative amount on 03-02: those rows
# load, and the orders' WARN value-rule checks report them.
WARNED = {("orders", "status_allowed"), ("orders", "amount_non_negative")}


def _checks_of(asset_names: set[str]) -> set[tuple[str, str]]:
    """(asset, check) pairs the code location declares for these assets."""
    graph = defs.resolve_asset_graph()
    return {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys
            if key.asset_key.to_user_string() in asset_names}


def test_materializing_one_orders_partition_twice_from_the_ui_keeps_its_fingerprint(
    dagster_ui: DagsterDev, page: Page, snap: Snap
) -> None:
    open_asset_from_graph(page, dagster_ui, "orders", snap)
    expect(page.get_by_role("tab", name="Checks")).to_be_visible()
    snap("orders-asset")
    expected_checks = {(asset, check, "succeeded") for asset, check in _checks_of({"orders"})}
    assert {("orders", "rerun_equality", "succeeded"),
            ("orders", "unique_natural_key", "succeeded")} <= expected_checks

    first_run = launch_one_partition(page, RERUN_DAY)
    expect(page.get_by_text(f"partition: {RERUN_DAY}")).to_be_visible()
    wait_for_run_success(page)
    assert check_lines_of_run(page) == expected_checks
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

    second_run = launch_one_partition(page, RERUN_DAY)
    assert second_run != first_run
    wait_for_run_success(page)
    assert check_lines_of_run(page) == expected_checks
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


def test_three_day_backfill_from_the_asset_graph_materializes_every_partition_with_its_checks(
    dagster_ui: DagsterDev, page: Page, snap: Snap
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
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_text(re.compile(r"^Created backfill"))).to_be_visible()
    page.get_by_role("link", name="View", exact=True).click()

    assert backfill_status(page) == "Succeeded"
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
    # One evaluation per check and day: a WARN rule fails on the day its row was planted.
    expected = {(asset, check, "succeeded") for asset, check in _checks_of(assets)} | {
        (asset, check, "failed") for asset, check in WARNED}
    assert check_lines_of_run(page) == expected
    snap("backfill-run-checks")

    for asset in sorted(assets):
        page.goto(f"{dagster_ui.url}/assets/{asset}")
        page.get_by_role("tab", name="Partitions").first.click()
        selection = page.get_by_placeholder(re.compile(r"^ex: "))
        selection.fill(f"[{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}]")
        selection.press("Enter")
        expect(page.get_by_text(f"{days} Partitions Selected")).to_be_visible()
        for label in (f"Materialized ({days})", "Failed (0)", "Missing (0)",
                      "Materializing (0)"):
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
    assert set(evaluations) == {(a, c, day) for a, c in _checks_of(assets)
                                for day in BACKFILL_DAYS}
    assert {key for key, passed in evaluations.items() if not passed} == {
        ("orders", "status_allowed", BACKFILL_DAYS[0]),
        ("orders", "amount_non_negative", BACKFILL_DAYS[1])}
