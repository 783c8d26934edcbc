"""Debian's Chromium driven by Playwright: offline-friendly flags and the UI's own words."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, Locator, Page, expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# The machine's network is closed: without these, Chromium keeps dialling Google services.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1600, "height": 1000}
# Generous but bounded: a run of four steps in subprocesses takes ~20 s on two cores, and
# a page of the UI a few seconds; a loaded CI machine (load 4-8) is several times slower.
# Every action and every expect() waits up to UI_TIMEOUT_MS (expect's own default is 5 s).
UI_TIMEOUT_MS = 120_000
RUN_TIMEOUT_MS = 240_000
BACKFILL_TIMEOUT_MS = 480_000


@contextmanager
def chromium_context() -> Iterator[BrowserContext]:
    """A fresh Chromium profile (its own --user-data-dir), closed on exit."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(
            f"{CHROMIUM} is missing: run `make browser` (installs Debian's chromium)"
        )
    with tempfile.TemporaryDirectory(prefix="idem-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport=VIEWPORT,  # type: ignore[arg-type]
        )
        context.set_default_timeout(UI_TIMEOUT_MS)
        expect.set_options(timeout=UI_TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


def open_page(context: BrowserContext) -> Page:
    """A page that waves away the first-visit community dialog whenever it shows up."""
    page = context.new_page()
    page.add_locator_handler(
        page.get_by_text("Join the Dagster community"),
        lambda: page.get_by_role("button", name="Skip").click(),
    )
    return page


def choose_partitions(page: Page, selection: str) -> Locator:
    """In the open launch dialog, type a partition selection over all time; the dialog."""
    dialog = page.get_by_role("dialog")
    # The dialog opens on the last 90 days when there are more partitions; the sample
    # days are older, and the selection field only accepts them over all time.
    show_all = dialog.get_by_text("Show all partitions")
    field = dialog.get_by_placeholder(re.compile(r"^ex: "))
    expect(show_all.or_(field).first).to_be_visible()
    if show_all.is_visible():
        show_all.click()
    field.fill(selection)
    field.press("Enter")
    return dialog


def metadata_value(page: Page, key: str) -> str:
    """The value cell of a metadata table row whose key cell is exactly ``key``."""
    row = page.get_by_role("row").filter(has=page.get_by_role("cell", name=key, exact=True))
    expect(row.first).to_be_visible()
    return row.first.get_by_role("cell").nth(1).inner_text().strip()
