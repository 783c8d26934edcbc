"""The instance storages that keep their connections open store what Dagster's own store.

The same ranged run of an asset with partitioned checks, on Dagster's SQLite storage and on
``idem_assets.instance.sqlite.SqliteStorage``, leaves the same events, the same partition
statuses and the same check statuses; runs from two processes at once both land; a process
following a run's events (the UI's watch) sees each as it is stored, while the writing
process keeps its connection open; a wiped instance and a forked child go on working. The
PostgreSQL profile's storage holds its connections instead of connecting per statement.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events.log import EventLogEntry

from idem_assets.instance.sqlite import (
    KeptSqliteEventLogStorage,
    KeptSqliteRunStorage,
    KeptSqliteScheduleStorage,
    kept_engine,
)
from idem_assets_tests.waiting import output_at_exit, wait_for_exit, wait_until

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "deploy" / "sqlite" / "dagster.yaml"
TELEMETRY_OFF = "telemetry:\n  enabled: false\n"
STOCK = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\n" + TELEMETRY_OFF
DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
CHECKS = ("first", "second")

# A daily asset with two partitioned checks, each day's result yielded from the asset's step
# (as the lake assets yield theirs); the second check fails on the middle day.
PROJECT = textwrap.dedent(
    """
    import dagster as dg

    DAILY = dg.DailyPartitionsDefinition(start_date="2024-03-01")
    KEY = dg.AssetKey("daily")

    @dg.multi_asset(
        outs={"daily": dg.AssetOut(is_required=False)},
        partitions_def=DAILY,
        backfill_policy=dg.BackfillPolicy.single_run(),
        can_subset=True,
        check_specs=[
            dg.AssetCheckSpec(name, asset=KEY, partitions_def=DAILY) for name in ("first", "second")
        ],
    )
    def daily(context: dg.AssetExecutionContext):
        yield dg.Output(None, output_name="daily", metadata={"days": len(context.partition_keys)})
        for key in context.partition_keys:
            for name in ("first", "second"):
                passed = not (name == "second" and key == "2024-03-02")
                yield dg.AssetCheckEvaluation(
                    asset_key=KEY, check_name=name, passed=passed, partition=key
                )
        for check in context.selected_asset_check_keys:
            name = context.assets_def.get_output_name_for_asset_check_key(check)
            yield dg.Output(None, output_name=name)

    class Nothing(dg.IOManager):
        def handle_output(self, context, obj):
            pass

        def load_input(self, context):
            return None

    defs = dg.Definitions(
        assets=[daily], resources={"io_manager": Nothing()}, executor=dg.in_process_executor
    )
    """
)


def _home(root: Path, profile: str) -> Path:
    home = root / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(profile)
    return home


def _launch(home: Path, code: Path, *, wait: bool = True) -> subprocess.Popen[bytes]:
    """``dg launch`` of the three days, as a user runs it (a process of its own)."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "NO_COLOR": "1"}
    argv = [str(Path(sys.executable).with_name("dagster")), "asset", "materialize"]
    argv += ["-f", str(code / "project.py"), "--select", "daily"]
    argv += ["--partition-range", f"{DAYS[0]}...{DAYS[-1]}"]
    proc = subprocess.Popen(argv, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if wait:
        out, err = output_at_exit(proc, "dagster asset materialize", seconds=600)
        assert proc.returncode == 0, err.decode()[-3000:]
    return proc


def _stored(home: Path) -> tuple[Counter[str], dict[str, object]]:
    """Events of every run by type, and what the UI reads: partitions and check statuses."""
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        kinds: Counter[str] = Counter()
        for run in instance.get_runs():
            for record in instance.get_records_for_run(run.run_id, limit=10_000).records:
                event = record.event_log_entry.dagster_event
                if event is not None:
                    kinds[event.event_type_value] += 1
        key = dg.AssetKey("daily")
        checks = [dg.AssetCheckKey(key, name) for name in CHECKS]
        statuses = {
            (info.check_key.name, info.partition_key): (
                info.latest_execution_status.value,
                info.is_current,
            )
            for info in instance.event_log_storage.get_asset_check_partition_info(checks)
        }
        seen = {
            "materialized": sorted(instance.get_materialized_partitions(key)),
            "checks": statuses,
            "runs": [run.status.value for run in instance.get_runs()],
        }
    return kinds, seen


@pytest.fixture
def code(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "project.py").write_text(PROJECT)
    return folder


def test_the_kept_storage_stores_what_dagsters_own_stores(tmp_path, code, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # _stored points it at each home
    stock, kept = _home(tmp_path / "stock", STOCK), _home(tmp_path / "kept", PROFILE.read_text())
    for home in (stock, kept):
        _launch(home, code)
        _launch(home, code)
    stock_events, stock_seen = _stored(stock)
    kept_events, kept_seen = _stored(kept)
    assert kept_events == stock_events
    assert kept_events["ASSET_CHECK_EVALUATION"] == 2 * len(DAYS) * len(CHECKS)
    assert kept_events["ASSET_MATERIALIZATION"] == 2 * len(DAYS)
    assert kept_seen == stock_seen
    assert kept_seen["materialized"] == list(DAYS) and kept_seen["runs"] == ["SUCCESS"] * 2
    failed = {k for k, (status, _) in kept_seen["checks"].items() if status == "FAILED"}  # type: ignore[union-attr]
    assert failed == {("second", "2024-03-02")}
    os.environ["DAGSTER_HOME"] = str(kept)
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, KeptSqliteEventLogStorage)
        assert isinstance(instance.run_storage, KeptSqliteRunStorage)
        assert isinstance(instance.schedule_storage, KeptSqliteScheduleStorage)
        # The same files Dagster's storage keeps, where it keeps them.
        assert (kept / "history" / "runs.db").exists() and (kept / "schedules").is_dir()
        assert (kept / "history" / "runs" / "index.db").exists()


def test_two_processes_store_runs_at_once(tmp_path, code, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    home = _home(tmp_path, PROFILE.read_text())
    # The instance's databases exist before runs start (``make dagster-home`` creates them):
    # Dagster's own migration stamp is not written by two processes at once.
    os.environ["DAGSTER_HOME"] = str(home)
    dg.DagsterInstance.get().dispose()
    procs = [_launch(home, code, wait=False) for _ in range(2)]
    for proc in procs:
        _, err = output_at_exit(proc, "dagster asset materialize", seconds=600)
        assert proc.returncode == 0, err.decode()[-3000:]
    events, seen = _stored(home)
    assert seen["runs"] == ["SUCCESS", "SUCCESS"]
    assert events["ASSET_CHECK_EVALUATION"] == 2 * len(DAYS) * len(CHECKS)
    assert events["ASSET_MATERIALIZATION"] == 2 * len(DAYS)


WRITER = textwrap.dedent(
    """
    import os, sys, time
    import dagster as dg
    from dagster._core.events.log import EventLogEntry

    run_id, count, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with dg.DagsterInstance.get() as instance:
        for i in range(count):
            while not os.path.exists(f"{go}.{i}"):  # the reader saw the event before
                time.sleep(0.01)
            entry = EventLogEntry(
                error_info=None, level=20, user_message=f"event {i}", run_id=run_id,
                timestamp=time.time(),
            )
            instance.event_log_storage.store_event(entry)
        while not os.path.exists(f"{go}.done"):  # connection held open until the reader is done
            time.sleep(0.01)
    """
)


def test_a_watch_sees_each_event_while_the_writer_keeps_its_connection(tmp_path, monkeypatch):
    """The UI follows a run through a watch of its database; the writer never closes it."""
    home = _home(tmp_path, PROFILE.read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    run_id = "0f0f0f0f-0000-4000-8000-000000000001"
    go = tmp_path / "go"
    seen: list[str] = []
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.watch(run_id, None, lambda entry, _: seen.append(entry.message))
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        writer = subprocess.Popen([sys.executable, str(script), run_id, "3", str(go)])
        try:
            for i in range(3):
                Path(f"{go}.{i}").touch()
                # Each event reaches the watch on its own, with the writer still connected.
                wait_until(
                    lambda i=i: f"event {i}" in seen,
                    f"event {i} to reach the watch",
                    seen=seen.copy,
                    process=writer,
                    every=0.02,
                )
        finally:
            Path(f"{go}.done").touch()
            assert wait_for_exit(writer, "the writer to close and exit") == 0
    assert seen == ["event 0", "event 1", "event 2"]


def test_a_wiped_instance_and_a_forked_child_go_on_storing(tmp_path, monkeypatch):
    home = _home(tmp_path, PROFILE.read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    def store(instance: dg.DagsterInstance, run_id: str, message: str) -> None:
        entry = EventLogEntry(
            error_info=None, level=20, user_message=message, run_id=run_id, timestamp=time.time()
        )
        instance.event_log_storage.store_event(entry)

    def messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
        records = instance.event_log_storage.get_records_for_run(run_id).records
        return [r.event_log_entry.user_message for r in records]

    with dg.DagsterInstance.get() as instance:
        store(instance, "run-a", "before")
        instance.wipe()
        assert messages(instance, "run-a") == []
        store(instance, "run-a", "after the wipe")
        assert messages(instance, "run-a") == ["after the wipe"]
        child = os.fork()
        if child == 0:  # the child stores with its own connections, never the parent's
            try:
                store(instance, "run-b", "from the child")
                os._exit(0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        store(instance, "run-a", "parent again")
        assert messages(instance, "run-b") == ["from the child"]
        assert messages(instance, "run-a") == ["after the wipe", "parent again"]


def test_synchronous_is_one_of_sqlites(tmp_path):
    with pytest.raises(ValueError, match="synchronous must be one of OFF, NORMAL, FULL, EXTRA"):
        kept_engine(f"sqlite:///{tmp_path}/x.db", "normal; DROP TABLE runs")


@pytest.mark.postgres
def test_the_postgres_storage_holds_its_connections(postgres_server, tmp_path, code, monkeypatch):
    """The same run on dagster-postgres's storage and on the profile's: the profile's opens a
    few server sessions where dagster-postgres opens several per stored event."""
    import psycopg

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))

    def sessions(url: str) -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT sum(sessions)::bigint FROM pg_stat_database WHERE datname = %s",
                (url.rsplit("/", 1)[-1],),
            ).fetchone()
        return int(row[0] or 0) if row else 0

    opened: dict[str, int] = {}
    for name, storage in (("stock", "postgres:\n"), ("kept", "custom:\n" + KEPT_PG)):
        url = postgres_server.create_database(f"instance_{name}")
        config = f"      postgres_url: {url.replace('postgresql://', 'postgresql+psycopg2://')}\n"
        if name == "stock":
            config = config[2:]
        home = _home(tmp_path / name, f"storage:\n  {storage}{config}{TELEMETRY_OFF}")
        os.environ["DAGSTER_HOME"] = str(home)
        dg.DagsterInstance.get().dispose()  # tables made before the run, as for the other
        before = sessions(url)
        _launch(home, code)
        opened[name] = sessions(url) - before
        events, seen = _stored(home)
        assert seen["runs"] == ["SUCCESS"] and seen["materialized"] == list(DAYS)
        assert events["ASSET_CHECK_EVALUATION"] == len(DAYS) * len(CHECKS)
    assert opened["kept"] * 3 < opened["stock"], opened


KEPT_PG = "    module: idem_assets.instance.postgres\n    class: PostgresStorage\n    config:\n"
