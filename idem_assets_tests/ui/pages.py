"""What a person does on each page of the Dagster UI, in the UI's own words (roles, text)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Locator, Page, expect

from idem_assets_tests.ui.browser import (
    BACKFILL_TIMEOUT_MS,
    RUN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    choose_partitions,
    metadata_value,
)
from idem_assets_tests.ui.server import DagsterDev

_CHECK_LINE = re.compile(r"^Check (\w+) (succeeded|failed) for materialization of (\w+)\.$")
_FILTERED_GRAPH = re.compile(r"/asset-groups~")
# How long a typed search gets to show in the URL before it is typed again (it was dropped).
SEARCH_TIMEOUT_MS = 20_000


def filter_graph(page: Page, selection: str) -> None:
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
        try:
            expect(page).to_have_url(_FILTERED_GRAPH, timeout=SEARCH_TIMEOUT_MS)
        except AssertionError:
            continue  # the keys went to an editor that re-mounted: type them again
        return
    raise AssertionError(f"the lineage search did not take {selection!r}: {page.url}")


def open_asset_from_graph(
    page: Page, server: DagsterDev, asset: str, snap: Callable[[str], Path]
) -> None:
    """Lineage → filter the lake group → select the node → open it in the catalog."""
    page.goto(server.url)
    page.get_by_role("link", name=re.compile(r"\bLineage$")).click()
    filter_graph(page, 'group:"lake"')
    node = page.locator(f'[data-tooltip="{asset}"]')
    expect(node).to_be_visible()
    snap("asset-graph")
    node.click()
    page.get_by_role("link", name="View in Asset Catalog").click()
    expect(page).to_have_url(re.compile(rf"/assets/{asset}(\?|$)"))


def launch_one_partition(page: Page, partition: str) -> tuple[str, float]:
    """From the open asset page: Materialize… one partition; follow the toast; the run id
    and when Launch was clicked (``time.time()``, comparable with the instance's times)."""
    page.get_by_role("button", name="Materialize…").click()
    dialog = choose_partitions(page, partition)
    expect(dialog.get_by_text("1 partition", exact=True)).to_be_visible()
    clicked = time.time()
    dialog.get_by_role("button", name="Launch 1 run").click()
    view = page.get_by_role("link", name="View", exact=True)
    href = view.get_attribute("href") or ""
    match = re.fullmatch(r"/runs/([0-9a-f-]{36})", href)
    assert match, f"toast link {href!r} does not name a run"
    view.click()
    return match.group(1), clicked


def wait_for_run_success(page: Page) -> None:
    """On a run page: wait for Success (and fail fast on Failure/Canceled)."""
    outcome = page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first
    expect(outcome).to_be_visible(timeout=RUN_TIMEOUT_MS)
    assert outcome.inner_text() == "Success", f"run ended {outcome.inner_text()}"


def check_lines_of_run(page: Page, expected: int | None = None) -> set[tuple[str, str, str]]:
    """On a run page: filter the log to check evaluations; (asset, check, outcome) read off it.

    The log is virtualized: it is read while scrolling until no new line appears for a few
    rounds (and, given ``expected``, until that many distinct lines were read or the
    scrolling brought none for ``UI_TIMEOUT_MS``: a page still rendering is waited for, not
    misread).
    """
    page.set_viewport_size({"width": 1600, "height": 2600})
    page.get_by_placeholder("Filter…").fill("type:ASSET_CHECK_EVALUATION")
    lines = page.get_by_text(_CHECK_LINE)
    expect(lines.first).to_be_visible()
    seen: set[str] = set()
    lines.first.hover()
    page.mouse.wheel(0, -100_000)  # the log follows its end: read it from the top
    page.wait_for_timeout(300)
    idle, last_new = 0, time.monotonic()
    while True:
        texts = {text.strip() for text in lines.all_inner_texts()}
        idle = idle + 1 if texts <= seen else 0
        last_new = last_new if idle else time.monotonic()
        seen |= texts
        complete = expected is None or len(seen) >= expected
        stalled = time.monotonic() - last_new > UI_TIMEOUT_MS / 1000
        if (complete and idle >= 3) or (idle >= 20 and stalled):
            break
        page.mouse.wheel(0, 1500 if idle < 2 else -100_000 if idle % 4 == 2 else 1500)
        page.wait_for_timeout(150)
    found: set[tuple[str, str, str]] = set()
    for text in seen:
        match = _CHECK_LINE.match(text)
        assert match is not None, text
        check, outcome, asset = match.groups()
        found.add((asset, check, outcome))
    page.set_viewport_size({"width": 1600, "height": 1000})
    return found


def latest_materialization(page: Page, server: DagsterDev, asset: str) -> dict[str, str]:
    """The asset's Events tab: which run made the newest event, and its write metadata."""
    page.goto(f"{server.url}/assets/{asset}")
    page.get_by_role("tab", name="Events").click()
    header = page.get_by_text(re.compile(r"materialized in run [0-9a-f]{8}$")).first
    expect(header).to_be_visible()
    return {
        "header": header.inner_text(),
        **{
            key: metadata_value(page, key)
            for key in ("committed", "fingerprint", "delta_version", "partition_range")
        },
    }


def scroll_to_metadata_row(page: Page, key: str) -> None:
    """Bring a metadata row to the top of the view (for the screenshot)."""
    row = page.get_by_role("row").filter(has=page.get_by_role("cell", name=key, exact=True))
    row.first.evaluate("element => element.scrollIntoView({block: 'start'})")


def backfill_rows(page: Page, assets: set[str]) -> dict[str, tuple[int, ...]]:
    """Backfill page: asset -> (targeted, in progress, succeeded, failed) read off the table."""
    lines = [line.strip() for line in page.locator("body").inner_text().splitlines()]
    lines = [line for line in lines if line]
    rows = {}
    for index, line in enumerate(lines):
        if line in assets and index + 5 < len(lines) and lines[index + 1].endswith("completed"):
            rows[line] = tuple(int(value) for value in lines[index + 2 : index + 6])
    return rows


def backfill_status(page: Page) -> str:
    """Backfill page: wait for a final status next to the "Status" label and return it."""
    final = re.compile(r"Status\s*(Succeeded|Failed|Canceled|Completed with failures)")
    expect(page.locator("body")).to_contain_text(final, timeout=BACKFILL_TIMEOUT_MS)
    match = final.search(page.locator("body").inner_text())
    assert match is not None
    return match.group(1)


def open_check(page: Page, server: DagsterDev, asset: str, check: str) -> None:
    """The asset's Checks tab with one check selected."""
    page.goto(f"{server.url}/assets/{asset}")
    page.get_by_role("tab", name="Checks").click()
    page.get_by_text(check, exact=True).first.click()
    expect(page).to_have_url(re.compile(rf"[?&]checkDetail={check}(&|$)"))


def _execution_history(page: Page) -> list[dict[str, str]]:
    """The open check's Execution history table, newest first: column -> cell text per row."""
    page.get_by_role("tab", name="Execution history").click()
    table = page.get_by_role("table").filter(
        has=page.get_by_role("columnheader", name="Partition", exact=True)
    )
    rows = table.get_by_role("row").filter(has=page.get_by_role("cell"))
    expect(rows.first).to_be_visible()
    columns = [text.strip() for text in table.get_by_role("columnheader").all_inner_texts()]
    return [
        dict(
            zip(
                columns,
                (text.strip() for text in row.get_by_role("cell").all_inner_texts()),
                strict=True,
            )
        )
        for row in rows.all()
    ]


def check_partition_statuses(
    page: Page, server: DagsterDev, asset: str, check: str
) -> dict[str, str]:
    """A check's Execution history: partition -> result of its newest evaluation (Passed…)."""
    open_check(page, server, asset, check)
    statuses: dict[str, str] = {}
    for row in _execution_history(page):  # the UI lists the newest evaluation first
        statuses.setdefault(row["Partition"], row["Evaluation result"])
    return statuses


def _metadata_rows(scope: Locator) -> dict[str, str]:
    """A metadata table's rows (key cell, value cell) inside ``scope``."""
    rows = scope.get_by_role("row").filter(has=scope.page.get_by_role("cell"))
    expect(rows.first).to_be_visible()
    found = {}
    for row in rows.all():
        cells = [text.strip() for text in row.get_by_role("cell").all_inner_texts()]
        if len(cells) == 2:
            found[cells[0]] = cells[1]
    return found


def check_evaluation_metadata(page: Page, partition: str) -> dict[str, str]:
    """Execution history (open check): the newest evaluation of ``partition``, its metadata
    from the row's "View metadata" dialog and its description (under "description")."""
    description = next(
        row["Description"] for row in _execution_history(page) if row["Partition"] == partition
    )
    history = page.get_by_role("table").filter(
        has=page.get_by_role("columnheader", name="Partition", exact=True)
    )
    row = (
        history.get_by_role("row")
        .filter(has=page.get_by_role("cell", name=partition, exact=True))
        .first
    )
    row.get_by_role("button", name="metadata").click()
    dialog = page.get_by_role("dialog").filter(has=page.get_by_text("Metadata", exact=True))
    expect(dialog).to_be_visible()
    metadata = _metadata_rows(dialog)
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    return {**metadata, "description": description}


def check_partition_detail(page: Page, partition: str) -> dict[str, str]:
    """The open check's Partitions tab: pick ``partition``; its latest result, description
    and metadata as the detail panel shows them (result under "result")."""
    page.get_by_role("tab", name="Partitions").last.click()
    page.get_by_placeholder("Filter by partition…").fill(partition)
    page.locator(f'[data-tooltip="{partition}"]').click()
    panel = (
        page.locator("div")
        .filter(has=page.get_by_text("Latest execution", exact=True))
        .filter(has=page.get_by_text("Metadata", exact=True))
        .last
    )
    expect(panel).to_be_visible()
    expect(panel).to_contain_text(re.compile(rf"^{re.escape(partition)}"))
    lines = [line.strip() for line in panel.inner_text().splitlines() if line.strip()]
    # The panel opens with the partition key (a measured copy too) and the result's tag.
    while lines and lines[0] == partition:
        lines.pop(0)
    heading = lines.index("Description") if "Description" in lines else None
    description = lines[heading + 1] if heading is not None else ""
    return {**_metadata_rows(panel), "result": lines[0], "description": description}


def check_partition_counts(page: Page, selection: str) -> dict[str, int]:
    """The open check's Partitions tab over ``selection``: its counters (Passed, Failed…)."""
    page.get_by_role("tab", name="Partitions").last.click()
    page.get_by_placeholder("Filter by partition…").fill("")  # the list's filter narrows too
    box = page.get_by_placeholder(re.compile(r"^ex: "))
    box.fill(selection)
    box.press("Enter")
    expect(page.get_by_text(re.compile(r"^\d+ Partitions? Selected$"))).to_be_visible()
    counters = page.get_by_text(re.compile(r"^[A-Z][A-Za-z ]+ \(\d+\)$"))
    found = {}
    for text in counters.all_inner_texts():
        name, _, count = text.strip().rpartition(" (")
        found[name] = int(count.rstrip(")"))
    return found
