"""Fixtures: one `dagster dev` per module, a fresh Chromium profile per test, screenshots."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from idem_assets_tests.ui.browser import chromium_context, open_page
from idem_assets_tests.ui.server import ROOT, DagsterDev, start_dagster_dev

ARTIFACTS = ROOT / "test-artifacts" / "ui"
Snap = Callable[[str], Path]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Remember each phase's report on the test item, so fixtures can see a failure."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def dagster_ui() -> Iterator[DagsterDev]:
    """The code location served as `make run` serves it, over four generated landing days."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # Not pytest's tmp_path: a module-scoped fixture outlives function tmp dirs.
    root = Path(tempfile.mkdtemp(prefix="idem-ui-"))
    server = start_dagster_dev(
        root, days=4, log_path=ARTIFACTS / "dagster-dev.log", launcher="serve"
    )
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def page(request: pytest.FixtureRequest) -> Iterator[Page]:
    """A browser page in a fresh profile; screenshotted into the artefacts if the test fails."""
    with chromium_context() as context:
        page = open_page(context)
        yield page
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            page.screenshot(
                path=str(ARTIFACTS / f"{_slug(request.node.name)}-FAILED.png"), full_page=True
            )


@pytest.fixture
def snap(page: Page, request: pytest.FixtureRequest) -> Snap:
    """Save a screenshot of the page under test-artifacts/ui/<test>-<step>.png."""
    counter = iter(range(1, 100))

    def save(step: str) -> Path:
        path = ARTIFACTS / f"{_slug(request.node.name)}-{next(counter):02d}-{_slug(step)}.png"
        page.screenshot(path=str(path))
        return path

    return save


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


LAUNCH_TIMINGS = ARTIFACTS / "launch-timings.jsonl"


def record_launch(
    what: str, clicked: float, seen: float, run_times: tuple[float, float, float]
) -> None:
    """Keep how long a launch from the UI took (``clicked`` and ``seen``: ``time.time()`` of
    the click on Launch and of the page showing success; ``run_times``: the run's creation,
    start and end from the instance): a measurement for the note, never an assertion (load
    makes it slower). ``above_run_s`` is what the user waits on top of the run itself until
    it ended; ``page_s`` how long the page took to show it (a backfill page polls every 10 s).
    """
    created, started, ended = run_times
    line = {
        "what": what,
        "click_to_page_success_s": round(seen - clicked, 2),
        "click_to_run_end_s": round(ended - clicked, 2),
        "run_s": round(ended - started, 2),
        "above_run_s": round(ended - clicked - (ended - started), 2),
        "created_to_started_s": round(started - created, 2),
        "page_s": round(seen - ended, 2),
    }
    with LAUNCH_TIMINGS.open("a") as out:
        out.write(json.dumps(line) + "\n")
    print(f"UI launch timing: {line}")
