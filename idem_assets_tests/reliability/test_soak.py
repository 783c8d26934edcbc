"""The seeded soak (``soak.py``) at the size CI affords; ``make reliability`` runs 300.

``IDEM_SOAK_SEED`` and ``IDEM_SOAK_OPERATIONS`` choose the soak; a failure prints the seed
and the replay command.
"""

from __future__ import annotations

import os

import pytest

from idem_assets_tests.reliability.soak import soak
from idem_assets_tests.reliability.world import record_row

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("IDEM_SOAK_SEED", "20261202"))
OPERATIONS = int(os.environ.get("IDEM_SOAK_OPERATIONS", "60"))


# ~5 s an operation on a quiet machine (~300 s for 60); ten times that leaves room for a
# loaded CI machine (load 4-8 on two cores).
@pytest.mark.timeout(max(1200, OPERATIONS * 50))
def test_a_random_soak_converges_to_a_clean_rebuild_at_every_quiet_point(tmp_path):
    report = soak(SEED, OPERATIONS, tmp_path)
    summary = report.summary()
    print(summary)
    last = report.quiet_points[-1]
    record_row(
        "soak",
        f"seed_{SEED}",
        runs=len(report.operations),
        faults=", ".join(f"{k} {v}" for k, v in sorted(report.faults.items())),
        equal=all(q.lake.equal for q in report.quiet_points),
        duplicates=sum(q.lake.duplicates + q.notification_duplicates for q in report.quiet_points),
        lost=sum(q.lake.lost + q.notifications_lost for q in report.quiet_points),
        quiet_points=len(report.quiet_points),
        deliveries=last.deliveries,
        expected_keys=last.notifications_expected,
    )
    assert len(report.operations) == OPERATIONS >= 60
    assert len(report.quiet_points) >= 2
    assert report.holds, summary
    # The soak did what it says: every kind of fault happened.
    assert {"SIGKILL", "concurrent pair", "notification faults"} <= set(report.faults), summary
