"""SIGKILL a notifications run in the middle of a batch; the rerun delivers each key once."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from idem_assets.checkpoint import Status
from idem_assets.defs.notifications.assets import notification_records, scope_of
from idem_assets.lake import read_rows
from idem_assets.notify import NotificationClient, NotificationServer
from idem_assets_tests.checkpoint.clock import lease_lead
from idem_assets_tests.harness import Project
from idem_assets_tests.reliability.world import (
    project_at,
    record_row,
    run_child,
    spawn_runs,
    trackers,
)

pytestmark = pytest.mark.slow

DAY = "2024-03-01"
JOB = "notifications_job"
TOKEN = "reliability-notify-token-7f3a"
BATCH, NTH = 3, 2
CONFIG = {
    "ops": {
        "notifications": {
            "config": {"lease_seconds": 60.0, "batch_size": BATCH, "retry_in_seconds": 0.0}
        }
    }
}
# scenario -> (crash point, was the N-th record delivered before the process died?)
POINTS = {
    "between_sends": ("outbox.before_send", False),
    "sent_not_settled": ("outbox.sent_unsettled", True),
}


def orders_loaded(root: Path, landing: Path) -> Project:
    """A lake holding day 1's orders."""
    project = project_at(root, landing)
    assert project.run_days(DAY, assets=["orders"]).success
    return project


@pytest.fixture(scope="module")
def expected_keys(landing: Path, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The idempotency keys a clean lake's orders call for on day 1."""
    clean = orders_loaded(tmp_path_factory.mktemp("clean-orders"), landing)
    orders = read_rows(clean.lake.table("orders").open())
    return {r.key for r in notification_records(orders, dt.date.fromisoformat(DAY))}


@pytest.fixture
def server(tmp_path: Path):
    """The reference notification service on loopback."""
    with NotificationServer(tmp_path / "notify.db", TOKEN) as running:
        yield running


@pytest.mark.parametrize("scenario", list(POINTS))
def test_sigkill_mid_notification_batch_then_rerun_delivers_each_key_once(
    scenario, landing, expected_keys, server, tmp_path
):
    point, sent = POINTS[scenario]
    assert len(expected_keys) > 2 * BATCH
    project = orders_loaded(tmp_path / "lake", landing)
    url = project.checkpoint.resolved_url
    client = NotificationClient(server.url, TOKEN)
    dead = run_child(
        project,
        tmp_path / "work",
        JOB,
        [DAY],
        crash_at=f"{point}:{NTH}",
        token=TOKEN,
        notify_url=server.url,
        run_config=CONFIG,
    )
    assert dead.killed and dead.crash_points() == [f"{point}:{NTH}"], dead.tail()

    # At death: NTH - 1 settled, the rest of the claimed batch held by the dead worker.
    delivered_at_death = NTH if sent else NTH - 1
    assert client.stats()["deliveries"] == delivered_at_death
    at_death = trackers(url, scope_of(dt.date.fromisoformat(DAY)))
    statuses = [t.status for t in at_death]
    assert statuses.count(Status.SUCCEEDED) == NTH - 1
    assert statuses.count(Status.IN_PROGRESS) == BATCH - (NTH - 1)
    held = {t.record_id for t in at_death if t.status == Status.IN_PROGRESS}

    # The rerun's clock starts past the dead worker's lease: nothing is waited out.
    rerun = run_child(
        project,
        tmp_path / "work",
        JOB,
        [DAY],
        token=TOKEN,
        notify_url=server.url,
        run_config=CONFIG,
        clock_ahead=lease_lead(url),
    )
    assert rerun.returncode == 0 and rerun.runs[0]["success"], rerun.tail()
    metadata = rerun.runs[0]["assets"]["notifications"]
    assert metadata["already_delivered"] == (1 if sent else 0)
    assert metadata["delivered"] == len(expected_keys) - delivered_at_death
    assert all(rerun.runs[0]["checks"].values()), rerun.runs[0]["checks"]

    after = trackers(url, scope_of(dt.date.fromisoformat(DAY)))
    assert {t.status for t in after} == {Status.SUCCEEDED}
    assert {t.record_id for t in after if t.attempts == 2} == held
    assert {(t.payload or {}).get("key") for t in after} == expected_keys
    stats, counts = client.stats(), client.delivery_counts()
    duplicates = sum(n - 1 for n in counts.values())
    lost = len(expected_keys - set(counts))
    equal = set(counts) == expected_keys and duplicates == 0
    record_row(
        "crash",
        f"notifications_{scenario}",
        runs=2,
        faults=f"SIGKILL at {point}:{NTH} (batch of {BATCH})",
        equal=equal,
        duplicates=duplicates,
        lost=lost,
        deliveries=stats["deliveries"],
        distinct_keys=stats["distinct_keys"],
        expected_keys=len(expected_keys),
        replays=stats["replays"],
    )
    assert stats["deliveries"] == stats["distinct_keys"] == len(expected_keys)
    assert equal and lost == 0
    assert stats["replays"] == (1 if sent else 0)


def test_rerun_reaches_the_dead_workers_records_only_after_their_lease(
    landing, expected_keys, server, tmp_path
):
    project = orders_loaded(tmp_path / "lake", landing)
    long_lease = {
        "ops": {"notifications": {"config": {"lease_seconds": 300.0, "batch_size": BATCH}}}
    }
    dead = run_child(
        project,
        tmp_path / "work",
        JOB,
        [DAY],
        crash_at="outbox.before_send:2",
        token=TOKEN,
        notify_url=server.url,
        run_config=long_lease,
    )
    assert dead.killed
    early = spawn_runs(
        project,
        tmp_path / "work",
        JOB,
        [DAY],
        token=TOKEN,
        notify_url=server.url,
        run_config=CONFIG,
    ).wait()
    metadata = early.runs[0]["assets"]["notifications"]
    # The held records are not sent again while the dead worker's lease is live.
    assert metadata["delivered"] == len(expected_keys) - BATCH
    assert "notifications:all_settled" in early.runs[0]["warnings"]
    stats = NotificationClient(server.url, TOKEN).stats()
    assert stats["deliveries"] == stats["distinct_keys"] == len(expected_keys) - BATCH + 1
