"""The UI as people use it: Debian's Chromium against `dagster dev`, clicking what a user clicks."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from idem_assets.definitions import defs
from idem_assets.defs.automation.jobs import DAILY_ASSETS
from idem_assets.lake import LakeTable
from idem_assets_tests.ui.browser import (
    BACKFILL_TIMEOUT_MS,
    RUN_TIMEOUT_MS,
    choose_partitions,
    metadata_value,
)
from idem_assets_tests.ui.conftest import Snap
from idem_assets_tests.ui.server import DagsterDev

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1200)]

# Disjoint days, so the two tests can share one server in any order.
RERUN_DAY = "2024-03-04"
BACKFILL_DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
_CHECK_LINE = re.compile(r"^Check (\w+) (succeeded|failed) for materialization of (\w+)\.$")
_CHECK_EVALUATIONS = """
query Checks($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { status }
  }
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on AssetCheckEvaluationEvent {
          evaluation { checkName success partition assetKey { path } }
        }
      }
    }
  }
}
"""


def _checks_of(asset_names: set[str]) -> set[tuple[str, str]]:
    """(asset, check) pairs the code location declares for these assets."""
    graph = defs.resolve_asset_graph()
    return {(key.asset_key.to_user_string(), key.name) for key in graph.asset_check_keys
            if key.asset_key.to_user_string() in asset_names}


def _filter_graph(page: Page, selection: str) -> None:
    """Type an asset selection into the lineage graph's search box, once the graph is there."""
    search = page.get_by_role("textbox", name="Search and filter assets")
    for _ in range(3):
        # The editor re-mounts while the graph loads and drops keys typed before that.
        expect(page.get_by_role("button", name="Materialize all…")).to_be_enabled()
        expect(page.get_by_text("lake", exact=True).first).to_be_visible()
        page.wait_for_load_state("networkidle")
        search.focus()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.type(selection)
        page.keyboard.press("Enter")
        if "/asset-groups~" in page.url:
            return
        page.wait_for_timeout(1000)
        if "/asset-groups~" in page.url:
            return
    raise AssertionError(f"the lineage search did not take {selection!r}: {page.url}")


def _open_asset_from_graph(page: Page, server: DagsterDev, asset: str, snap: Snap) -> None:
    """Lineage → filter the lake group → select the node → open it in the catalog."""
    page.goto(server.url)
    page.get_by_role("link", name=re.compile(r"\bLineage$")).click()
    _filter_graph(page, 'group:"lake"')
    node = page.locator(f'[data-tooltip="{asset}"]')
    expect(node).to_be_visible()
    snap("asset-graph")
    node.click()
    page.get_by_role("link", name="View in Asset Catalog").click()
    expect(page).to_have_url(re.compile(rf"/assets/{asset}(\?|$)"))


def _launch_one_partition(page: Page, partition: str) -> str:
    """From the open asset page: Materialize… one partition; follow the toast; the run id."""
    page.get_by_role("button", name="Materialize…").click()
    dialog = choose_partitions(page, partition)
    expect(dialog.get_by_text("1 partition", exact=True)).to_be_visible()
    dialog.get_by_role("button", name="Launch 1 run").click()
    view = page.get_by_role("link", name="View", exact=True)
    href = view.get_attribute("href") or ""
    match = re.fullmatch(r"/runs/([0-9a-f-]{36})", href)
    assert match, f"toast link {href!r} does not name a run"
    view.click()
    return match.group(1)


def _wait_for_run_success(page: Page) -> None:
    """On a run page: wait for Success (and fail fast on Failure/Canceled)."""
    outcome = page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first
    expect(outcome).to_be_visible(timeout=RUN_TIMEOUT_MS)
    assert outcome.inner_text() == "Success", f"run ended {outcome.inner_text()}"


def _check_lines_of_run(page: Page) -> set[tuple[str, str, str]]:
    """On a run page: filter the log to check evaluations; (asset, check, outcome) read off it."""
    page.set_viewport_size({"width": 1600, "height": 2600})  # the log is virtualized
    page.get_by_placeholder("Filter…").fill("type:ASSET_CHECK_EVALUATION")
    lines = page.get_by_text(_CHECK_LINE)
    expect(lines.first).to_be_visible()
    found = set()
    for text in lines.all_inner_texts():
        match = _CHECK_LINE.match(text.strip())
        assert match is not None
        check, outcome, asset = match.groups()
        found.add((asset, check, outcome))
    page.set_viewport_size({"width": 1600, "height": 1000})
    return found


def _latest_materialization(page: Page, server: DagsterDev, asset: str) -> dict[str, str]:
    """The asset's Events tab: which run made the newest event, and its write metadata."""
    page.goto(f"{server.url}/assets/{asset}")
    page.get_by_role("tab", name="Events").click()
    header = page.get_by_text(re.compile(r"materialized in run [0-9a-f]{8}$")).first
    expect(header).to_be_visible()
    return {
        "header": header.inner_text(),
        **{key: metadata_value(page, key)
           for key in ("committed", "fingerprint", "delta_version", "partition_range")},
    }


def _check_evaluations(server: DagsterDev, run_id: str) -> dict[tuple[str, str], tuple]:
    """(asset, check) -> (passed, partition) of a run, straight from the instance."""
    data = server.graphql(_CHECK_EVALUATIONS, {"runId": run_id})
    found = {}
    for event in data["logsForRun"]["events"]:
        if event["__typename"] == "AssetCheckEvaluationEvent":
            evaluation = event["evaluation"]
            key = ("/".join(evaluation["assetKey"]["path"]), evaluation["checkName"])
            found[key] = (evaluation["success"], evaluation["partition"])
    return found


def test_materializing_one_orders_partition_twice_from_the_ui_keeps_its_fingerprint(
    dagster_ui: DagsterDev, page: Page, snap: Snap
) -> None:
    _open_asset_from_graph(page, dagster_ui, "orders", snap)
    expect(page.get_by_role("tab", name="Checks")).to_be_visible()
    snap("orders-asset")
    expected_checks = {(asset, check, "succeeded") for asset, check in _checks_of({"orders"})}
    assert {("orders", "rerun_equality", "succeeded"),
            ("orders", "unique_natural_key", "succeeded")} <= expected_checks

    first_run = _launch_one_partition(page, RERUN_DAY)
    expect(page.get_by_text(f"partition: {RERUN_DAY}")).to_be_visible()
    _wait_for_run_success(page)
    assert _check_lines_of_run(page) == expected_checks
    snap("first-run-checks")
    first = _latest_materialization(page, dagster_ui, "orders")
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

    second_run = _launch_one_partition(page, RERUN_DAY)
    assert second_run != first_run
    _wait_for_run_success(page)
    assert _check_lines_of_run(page) == expected_checks
    second = _latest_materialization(page, dagster_ui, "orders")
    assert second["header"] == f"Partition {RERUN_DAY} materialized in run {second_run[:8]}"
    assert second["committed"] == "false"
    assert second["fingerprint"] == first["fingerprint"]
    assert second["delta_version"] == first["delta_version"]
    snap("rerun-materialization")

    # The Checks tab shows only the latest evaluation; the instance says which run each
    # evaluation belongs to and for which partition.
    for run_id in (first_run, second_run):
        evaluations = _check_evaluations(dagster_ui, run_id)
        assert {key for key in evaluations} == {(a, c) for a, c, _ in expected_checks}
        assert all(value == (True, RERUN_DAY) for value in evaluations.values()), evaluations
    table = LakeTable(str(dagster_ui.lake_dir / "orders")).open()
    assert table is not None and str(table.version()) == first["delta_version"]


def _backfill_rows(page: Page, assets: set[str]) -> dict[str, tuple[int, ...]]:
    """Backfill page: asset -> (targeted, in progress, succeeded, failed) read off the table."""
    lines = [line.strip() for line in page.locator("body").inner_text().splitlines()]
    lines = [line for line in lines if line]
    rows = {}
    for index, line in enumerate(lines):
        if line in assets and index + 5 < len(lines) and lines[index + 1].endswith("completed"):
            rows[line] = tuple(int(value) for value in lines[index + 2:index + 6])
    return rows


def _backfill_status(page: Page) -> str:
    """Backfill page: wait for a final status next to the "Status" label and return it."""
    final = re.compile(r"Status\s*(Succeeded|Failed|Canceled|Completed with failures)")
    expect(page.locator("body")).to_contain_text(final, timeout=BACKFILL_TIMEOUT_MS)
    match = final.search(page.locator("body").inner_text())
    assert match is not None
    return match.group(1)


def test_three_day_backfill_from_the_asset_graph_turns_every_partition_and_check_green(
    dagster_ui: DagsterDev, page: Page, snap: Snap
) -> None:
    assets = {asset.key.to_user_string() for asset in DAILY_ASSETS}
    page.goto(dagster_ui.url)
    page.get_by_role("link", name=re.compile(r"\bLineage$")).click()
    _filter_graph(page, " or ".join(f'key:"{asset}"' for asset in sorted(assets)))
    for asset in assets:
        expect(page.locator(f'[data-tooltip="{asset}"]')).to_be_visible()
    page.get_by_role("button", name="Materialize all…").click()
    dialog = choose_partitions(page, f"[{BACKFILL_DAYS[0]}...{BACKFILL_DAYS[-1]}]")
    expect(dialog.get_by_text(f"{len(BACKFILL_DAYS)} partitions", exact=True)).to_be_visible()
    snap("launch-backfill")
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_text(re.compile(r"^Created backfill"))).to_be_visible()
    page.get_by_role("link", name="View", exact=True).click()

    assert _backfill_status(page) == "Succeeded"
    expect(page.get_by_text("100% completed")).to_have_count(len(assets))
    days = len(BACKFILL_DAYS)
    assert _backfill_rows(page, assets) == {asset: (days, 0, days, 0) for asset in assets}
    snap("backfill-succeeded")

    # A single-run backfill policy: the whole range is one run.
    page.get_by_role("tab", name="Runs").click()
    run_links = page.get_by_role("link", name=re.compile(r"\b[0-9a-f]{8}$"))
    expect(run_links).to_have_count(1)
    run_link = run_links.first.get_attribute("href") or ""
    assert re.fullmatch(r"/runs/[0-9a-f-]{36}", run_link), run_link
    run_links.first.click()
    _wait_for_run_success(page)
    expected = {(asset, check, "succeeded") for asset, check in _checks_of(assets)}
    assert _check_lines_of_run(page) == expected
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

    run_id = run_link.rsplit("/", 1)[-1]
    evaluations = _check_evaluations(dagster_ui, run_id)
    assert set(evaluations) == {(a, c) for a, c, _ in expected}
    assert all(passed for passed, _ in evaluations.values()), evaluations
