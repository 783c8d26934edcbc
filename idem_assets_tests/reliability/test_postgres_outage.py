"""PostgreSQL going away mid-run: the checkpoint store's server stops while records are held.

A notifications run keeps its records in a PostgreSQL checkpoint store of its own server;
while it is sending (the service answers slowly), the server is stopped the way an outage
stops it (immediate shutdown: connections cut; deliveries are held in flight meanwhile, so
the run is cut mid-way on any machine) and started again a few seconds later. The
run fails with the store's error; nothing is stuck in progress past its lease; the rerun
delivers every key the orders call for, each exactly once (a key whose delivery happened
but was never recorded is replayed by the service, not delivered again).
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.defs.notifications.assets import notification_records, scope_of
from idem_assets.lake import read_rows
from idem_assets.notify import Faults, NotificationClient, NotificationServer
from idem_assets_tests.checkpoint.clock import lease_lead
from idem_assets_tests.fixtures.postgres import running_postgres, start_server, stop_server
from idem_assets_tests.reliability.world import (
    compare_lakes,
    project_at,
    record_row,
    run_child,
    spawn_runs,
    trackers,
)
from idem_assets_tests.waiting import wait_until

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

        # Four deliveries go through; every later one is held in flight until the server is
        # down: the run is cut mid-way however fast or slow this machine is.
        service.set_faults(Faults(hold_after=4))
        child = spawn_runs(
            project,
            tmp_path / "work",
            "notifications_job",
            [DAY],
            token=TOKEN,
            notify_url=service.url,
            run_config=CONFIG,
        )
        wait_until(
            lambda: client.stats()["deliveries"] >= 4,
            "4 deliveries by the notifications run",
            seen=client.stats,
            process=child.process,
            output=child.stderr_tail,
        )
        stop_server(server)
        service.set_faults(Faults())  # released: the run goes on into a store that is gone
        outage = child.wait()
        time.sleep(2.0)  # the outage itself: the server stays down a while
        start_server(server)

        assert outage.returncode == 0 and outage.runs, outage.tail()
        assert not outage.runs[0]["success"]
        error = " ".join(outage.runs[0]["errors"])
        assert "checkpoint" in error.lower() or "connection" in error.lower(), error
        delivered_in_outage = client.stats()["deliveries"]
        assert 4 <= delivered_in_outage < len(expected)

        # The rerun's clock starts past the failed run's leases: nothing is waited out.
        rerun = run_child(
            project,
            tmp_path / "work",
            "notifications_job",
            [DAY],
            token=TOKEN,
            notify_url=service.url,
            run_config=CONFIG,
            clock_ahead=lease_lead(url),
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


PROFILE = Path(__file__).resolve().parents[2] / "deploy" / "postgres" / "dagster.yaml"
LAKE_TABLES = ("orders", "customers", "events", "daily_sales", "quarantine")


def test_the_server_under_the_dagster_instance_and_the_store_going_away_mid_backfill(
    landing, tmp_path, monkeypatch
):
    """The PostgreSQL profile: runs, events and the checkpoint store on one server, which
    stops while a backfill runs and comes back; the rerun converges to a clean load."""
    with running_postgres() as server:
        url = server.create_database("outage")
        parts = urlsplit(url)
        monkeypatch.setenv("DAGSTER_PG_HOST", parts.hostname or "")
        monkeypatch.setenv("DAGSTER_PG_PORT", str(parts.port))
        monkeypatch.setenv("DAGSTER_PG_DB", parts.path.lstrip("/"))
        monkeypatch.setenv("DAGSTER_PG_USERNAME", parts.username or "")
        monkeypatch.setenv("DAGSTER_PG_PASSWORD", "unused-the-test-server-trusts-loopback")
        home = tmp_path / "dagster_home"
        home.mkdir()
        shutil.copyfile(PROFILE, home / "dagster.yaml")
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        project = project_at(tmp_path / "lake", landing, state_url=url)
        days = ["2024-03-01", "2024-03-04"]

        # The outage starts once the run is under way (its first step started) and lasts
        # 3 s, whatever the run is doing then: the server comes back on its own schedule.
        # The start is read from the instance, which stores every event whatever the console
        # prints; opened first, so that its tables exist before the child's run writes them.
        with dg.DagsterInstance.get() as instance:
            child = spawn_runs(
                project,
                tmp_path / "work",
                "daily_lake_job",
                [days],
                instance="home",
                write_lease_seconds=2.0,
            )
            wait_until(
                lambda: (
                    instance.get_records_for_run(
                        child.run_ids[0], of_type=dg.DagsterEventType.STEP_START, limit=1
                    ).records
                ),
                "the backfill's first STEP_START",
                process=child.process,
                output=child.stderr_tail,
            )
        time.sleep(0.5)  # into the step, wherever it is by then: not a wait for an event
        stop_server(server)
        time.sleep(3.0)  # the outage itself: the server stays down a while
        start_server(server)
        outage = child.wait()

        rerun = run_child(
            project,
            tmp_path / "work",
            "daily_lake_job",
            [days],
            instance="home",
            write_lease_seconds=2.0,
            clock_ahead=lease_lead(url),
        )
        assert rerun.runs and rerun.runs[0]["success"], rerun.tail()
        with open_store(url) as store:
            held = [t for t in store.list(statuses=[Status.IN_PROGRESS])]
        assert held == []

        clean = project_at(tmp_path / "clean", landing)
        assert clean.run_days(days[0], days[1]).success
        found = compare_lakes(project.lake, clean.lake, LAKE_TABLES)
        record_row(
            "outage",
            "postgres_instance_and_store_stopped_mid_backfill",
            runs=2,
            faults="PostgreSQL (runs, events, checkpoint store) stopped for 3 s during a "
            "4-day backfill",
            equal=found.equal,
            duplicates=found.duplicates,
            lost=found.lost,
            outage_returncode=outage.returncode,
            outage_run_succeeded=bool(outage.runs and outage.runs[0]["success"]),
            outage_error=(outage.runs[0]["errors"][:1] if outage.runs else outage.tail()[-300:]),
        )
        assert found.equal and found.lost == 0, found
