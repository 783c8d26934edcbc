"""The PostgreSQL deployment profile, on a real PostgreSQL 15: runs, checks, sensors, state."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
import pytest
from dagster._core.scheduler.instigation import TickStatus
from dagster._serdes import serialize_value
from dagster_postgres import (
    PostgresEventLogStorage,
    PostgresRunStorage,
    PostgresScheduleStorage,
)

from idem_assets.checkpoint import Status, open_store
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.generator import generate
from idem_assets_tests.deploy.daemon import SensorDaemon, daemon_workspace
from idem_assets_tests.harness import (
    START,
    Project,
    check_results,
    day_keys,
    materialization_metadata,
)
from idem_assets_tests.ui.server import start_dagster_dev

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "deploy" / "postgres" / "dagster.yaml"
DAYS = 2
RUNS_SECONDS = 420.0


@pytest.fixture
def pg_instance(fresh_postgres_url, tmp_path, monkeypatch):
    """DAGSTER_HOME holding the profile, env vars set as an operator would, the instance."""
    url = urlsplit(fresh_postgres_url)
    password = f"pw-{secrets.token_hex(8)}"  # the test server trusts loopback; never written
    monkeypatch.setenv("DAGSTER_PG_HOST", url.hostname or "")
    monkeypatch.setenv("DAGSTER_PG_PORT", str(url.port))
    monkeypatch.setenv("DAGSTER_PG_DB", url.path.lstrip("/"))
    monkeypatch.setenv("DAGSTER_PG_USERNAME", url.username or "")
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", password)
    # The checkpoint store lives on the same server; libpq takes the password from PGPASSWORD.
    monkeypatch.setenv("PGPASSWORD", password)
    monkeypatch.setenv("IDEM_STATE_URL", fresh_postgres_url)
    monkeypatch.setenv("IDEM_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("IDEM_LAKE_DIR", str(tmp_path / "lake"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(PROFILE, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    generate(tmp_path / "landing", START, DAYS, seed=7)
    instance = dg.DagsterInstance.get()
    try:
        yield instance, password
    finally:
        instance.dispose()


def _project(instance: dg.DagsterInstance, root: Path) -> Project:
    """The harness project wired to the env-configured resources, as the code location is."""
    return Project(
        root=root, lake=LakeResource(), checkpoint=CheckpointResource(), instance=instance
    )


def test_profile_keeps_runs_events_and_schedules_in_postgres_without_the_password(pg_instance):
    instance, password = pg_instance
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
    # The instance ref travels on subprocess command lines: it must carry env names only.
    ref = serialize_value(instance.get_ref())
    assert password not in ref
    assert "DAGSTER_PG_PASSWORD" in ref
    assert password not in PROFILE.read_text()


def test_materialize_rerun_and_checks_on_the_postgres_instance(pg_instance, tmp_path):
    instance, _ = pg_instance
    project = _project(instance, tmp_path)
    day = day_keys(1)[0]
    first, rerun = project.run_days(day), project.run_days(day)
    assert first.success and rerun.success
    for result in (first, rerun):
        outcomes = check_results(result)
        assert outcomes and all(outcomes.values()), outcomes
        assert {("orders", "rerun_equality"), ("orders", "unique_natural_key")} <= set(outcomes)
    before, after = materialization_metadata(first), materialization_metadata(rerun)
    for table in ("orders", "customers", "events", "daily_sales"):
        assert after[table]["fingerprint"] == before[table]["fingerprint"], table
        assert after[table]["committed"] is False, table
        assert after[table]["delta_version"] == before[table]["delta_version"], table

    # Runs and materializations are in PostgreSQL, readable by any other process.
    assert {run.run_id for run in instance.get_runs()} == {first.run_id, rerun.run_id}
    events = instance.fetch_materializations(dg.AssetKey("orders"), limit=10).records
    assert [e.run_id for e in events] == [rerun.run_id, first.run_id]
    assert {e.partition_key for e in events} == {day}

    # So are the lake write records of the checkpoint store (same server).
    with open_store(project.checkpoint.resolved_url) as store:
        assert store.backend == "postgresql"
        writes = store.list("lake/orders")
        assert len(writes) == 2
        assert {w.status for w in writes} == {Status.SUCCEEDED}


DAILY_SENSORS = ("orders_landing_sensor", "customers_landing_sensor", "events_landing_sensor")


def test_landing_sensor_ticks_record_runs_and_the_instance_dedupes_run_keys(pg_instance, tmp_path):
    instance, _ = pg_instance
    with daemon_workspace(instance, ROOT) as workspace:
        daemons = [SensorDaemon(workspace, name) for name in DAILY_SENSORS]
        first = [daemon.tick() for daemon in daemons]
        assert {tick.status for tick in first} == {TickStatus.SUCCESS}
        runs = instance.get_runs()
        # One run per (source, day): orders, customers and events for each landing day.
        run_keys = [key for tick in first for key in tick.run_keys]
        assert len(runs) == sum(len(t.run_ids) for t in first) == 3 * DAYS
        keys = {run.tags["dagster/run_key"] for run in runs}
        assert keys == set(run_keys) and len(keys) == 3 * DAYS
        assert {run.tags["dagster/partition"] for run in runs} == set(day_keys(DAYS))
        assert {run.status for run in runs} == {dg.DagsterRunStatus.QUEUED}

        for daemon in daemons:
            quiet = daemon.tick()  # same files, cursor remembers them
            assert quiet.status == TickStatus.SKIPPED
            assert quiet.run_ids == []

        # Without its cursor a sensor asks for the same runs again; the instance knows
        # those run keys and launches nothing.
        orders = daemons[0]
        orders.forget_cursor()
        replay = orders.tick()
        assert set(replay.run_keys) == set(first[0].run_keys)
        assert replay.run_ids == []
        assert replay.status == TickStatus.SKIPPED
        assert len(instance.get_runs()) == 3 * DAYS
        assert len(orders.ticks()) == 3


@pytest.mark.timeout(1200)  # `dagster dev` up (up to 300 s), then RUNS_SECONDS for the runs
def test_dagster_dev_on_the_postgres_profile_runs_what_its_sensor_requests(
    pg_instance, tmp_path, monkeypatch
):
    """`make run IDEM_INSTANCE=postgres`: webserver, daemon and run workers share PostgreSQL."""
    instance, _ = pg_instance
    root = tmp_path / "dev"
    server = start_dagster_dev(
        root,
        days=1,
        log_path=root / "dagster-dev.log",
        profile=PROFILE,
        state_url=os.environ["IDEM_STATE_URL"],
    )
    try:
        # What a person does in the UI's Automation tab: turn the landing sensor on.
        with daemon_workspace(instance, ROOT) as workspace:
            for name in DAILY_SENSORS:
                SensorDaemon(workspace, name)
        deadline = time.monotonic() + RUNS_SECONDS
        while time.monotonic() < deadline:
            runs = instance.get_runs()
            if len(runs) == 3 and all(run.is_finished for run in runs):
                break
            time.sleep(2)
        else:
            raise AssertionError(
                f"runs not finished: {[(r.run_id, r.status) for r in runs]}\n{server.log_tail()}"
            )
    finally:
        server.stop()
    assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert {run.tags["idem/source"] for run in runs} == {"orders", "customers", "events"}
    assert len({run.tags["dagster/run_key"] for run in runs}) == 3
    # The daemon's runs wrote the lake and their checkpoint records to the same server.
    lake = LakeResource(landing_dir=str(root / "landing"), lake_dir=str(root / "lake"))
    for table in ("orders", "customers", "events", "daily_sales"):
        assert lake.table(table).exists(), table
    with open_store(os.environ["IDEM_STATE_URL"]) as store:
        assert {w.status for w in store.list("lake/orders")} == {Status.SUCCEEDED}
