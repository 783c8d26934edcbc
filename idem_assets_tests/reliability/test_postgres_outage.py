"""PostgreSQL going away mid-run: the checkpoint store's server stops while records are held.

A notifications run keeps its records in a PostgreSQL checkpoint store of its own server;
while it is sending (the service answers slowly), the server is stopped the way an outage
stops it (immediate shutdown: connections cut) and started again a few seconds later. The
run fails with the store's error; nothing is stuck in progress past its lease; the rerun
delivers every key the orders call for, each exactly once (a key whose delivery happened
but was never recorded is replayed by the service, not delivered again).
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from idem_assets.checkpoint import Status
from idem_assets.defs.notifications.assets import notification_records, scope_of
from idem_assets.lake import read_rows
from idem_assets.notify import Faults, NotificationClient, NotificationServer
from idem_assets_tests.fixtures.postgres import running_postgres, start_server, stop_server
from idem_assets_tests.reliability.world import (
    project_at,
    record_row,
    run_child,
    spawn_runs,
    trackers,
    wait_for_leases,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

DAY = "2024-03-01"
TOKEN = "outage-notify-token-91b2"
CONFIG = {
    "ops": {
        "notifications": {
            "config": {"lease_seconds": 2.0, "batch_size": 3, "retry_in_seconds": 0.0}
        }
    }
}


def test_the_checkpoint_server_going_away_mid_run_loses_and_repeats_nothing(landing, tmp_path):
    with (
        running_postgres() as server,
        NotificationServer(tmp_path / "notify.db", TOKEN) as service,
    ):
        url = server.create_database("outage")
        project = project_at(tmp_path / "lake", landing, state_url=url)
        assert project.run_days(DAY, assets=["orders"]).success
        orders = read_rows(project.lake.table("orders").open())
        expected = {r.key for r in notification_records(orders, dt.date.fromisoformat(DAY))}
        client = NotificationClient(service.url, TOKEN)

        service.set_faults(Faults(latency_ms=150.0))  # a run of several seconds
        child = spawn_runs(
            project,
            tmp_path / "work",
            "notifications_job",
            [DAY],
            token=TOKEN,
            notify_url=service.url,
            run_config=CONFIG,
        )
        deadline = time.monotonic() + 120
        while client.stats()["deliveries"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_server(server)
        outage = child.wait()
        time.sleep(2.0)
        start_server(server)
        service.set_faults(Faults())

        assert outage.returncode == 0 and outage.runs, outage.tail()
        assert not outage.runs[0]["success"]
        error = " ".join(outage.runs[0]["errors"])
        assert "checkpoint" in error.lower() or "connection" in error.lower(), error
        delivered_in_outage = client.stats()["deliveries"]
        assert 4 <= delivered_in_outage < len(expected)

        wait_for_leases(url)
        rerun = run_child(
            project,
            tmp_path / "work",
            "notifications_job",
            [DAY],
            token=TOKEN,
            notify_url=service.url,
            run_config=CONFIG,
        )
        assert rerun.runs and rerun.runs[0]["success"], rerun.tail()

        after = trackers(url, scope_of(dt.date.fromisoformat(DAY)))
        assert {t.status for t in after} == {Status.SUCCEEDED}
        counts = client.delivery_counts()
        duplicates = sum(n - 1 for n in counts.values())
        lost = len(expected - set(counts))
        record_row(
            "outage",
            "postgres_checkpoint_server_stopped_mid_notifications",
            runs=2,
            faults="PostgreSQL stopped (immediate) after 4 deliveries, restarted 2 s later",
            equal=set(counts) == expected,
            duplicates=duplicates,
            lost=lost,
            deliveries=client.stats()["deliveries"],
            delivered_before_outage=delivered_in_outage,
        )
        assert set(counts) == expected and duplicates == 0 and lost == 0
        assert client.stats()["deliveries"] == len(expected)
