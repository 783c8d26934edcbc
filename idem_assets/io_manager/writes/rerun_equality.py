"""Rerun equality: whether a table already holds what a clean rerun would write.

Each strategy compares in its own way (``compare`` and ``compare_days`` on the strategy
objects: a slice fingerprint for an overwrite, a MERGE plan for a merge, a history plan
for a history); what they return, and the fingerprint comparison they share, are here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.window import Window
from idem_assets.lake import Fingerprint, count_row_differences, fingerprint

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclass(frozen=True)
class RerunComparison:
    """Whether the table already equals what a clean rerun would produce."""

    passed: bool
    rows_differing: int
    expected: Fingerprint
    stored: Fingerprint
    detail: str


def compared(
    window: Window,
    expected: Fingerprint,
    stored: Fingerprint,
    rows: Callable[[], tuple[pa.Table, pa.Table]],
) -> RerunComparison:
    """The comparison of two fingerprints; the differing rows are counted only when they
    differ (``rows`` gives the recomputed and the stored rows)."""
    differing = 0 if stored == expected else count_row_differences(*rows())
    return RerunComparison(
        passed=stored == expected,
        rows_differing=differing,
        expected=expected,
        stored=stored,
        detail=f"{window.label()}: {differing} row(s) differ between the table and a clean rerun",
    )


def day_rows(rows: pa.Table, column: str, day: dt.date) -> pa.Table:
    """The rows whose ``column`` is ``day``."""
    import pyarrow.compute as pc  # here, not at import: see idem_assets._lazy

    return rows.filter(
        pc.equal(rows.column(column), pa.scalar(day, rows.schema.field(column).type))
    )


def day_batch(batch: PreparedBatch, column: str, day: dt.date) -> PreparedBatch:
    """The batch's rows of one day, as a batch of their own."""
    rows = day_rows(batch.rows, column, day)
    return PreparedBatch(rows, rows.num_rows, 0, 0, fingerprint(rows))
