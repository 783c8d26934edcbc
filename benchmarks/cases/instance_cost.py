"""What one stored event costs, by instance: Dagster's SQLite and PostgreSQL storages, and the
same with their connections kept (``idem_assets/instance``).

One process per contender runs ``dagster asset materialize`` of a daily asset over N days as
one range (a single-run backfill policy), with C partitioned checks whose results the step
yields for every day (as the lake assets yield theirs), and again without checks: the
difference, divided by N × C, is what Dagster spends to store one check evaluation; the run
without checks, divided by N, what a materialization costs with the run around it. Every
contender gets a fresh instance whose storage is created before the run. PostgreSQL is a
throwaway 15 server on loopback with its durable defaults (fsync and synchronous commit on);
its server processes' CPU is counted beside the client's (the postmaster's own, its live
backends' and the exited ones' it has reaped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import table

DAYS, QUICK_DAYS, CHECKS = 365, 120, 5
FIRST = "1992-01-01"
STOCK_SQLITE = "Dagster's SQLite storage"
KEPT_SQLITE = "SQLite, connections kept (the project's profile)"
STOCK_PG = "dagster-postgres"
KEPT_PG = "PostgreSQL, connections kept (the project's postgres profile)"
KEPT_PG_ASYNC = "the same, the database set to synchronous_commit = off"
POSTGRES = (STOCK_PG, KEPT_PG, KEPT_PG_ASYNC)
ORDER = [STOCK_SQLITE, KEPT_SQLITE, *POSTGRES]
PROJECT = """\
import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="{first}", timezone="UTC")
NAMES = [f"check_{{i}}" for i in range({checks})]


class Nothing(dg.IOManager):
    def handle_output(self, context, obj): pass
    def load_input(self, context): return None


@dg.multi_asset(
    outs={{"daily": dg.AssetOut(is_required=False)}},
    partitions_def=DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    can_subset=True,
    check_specs=[dg.AssetCheckSpec(n, asset="daily", partitions_def=DAILY) for n in NAMES],
)
def daily(context: dg.AssetExecutionContext):
    key = dg.AssetKey("daily")
    yield dg.Output(None, output_name="daily")
    for partition in context.partition_keys:
        for check in context.selected_asset_check_keys:
            yield dg.AssetCheckEvaluation(
                asset_key=key, check_name=check.name, passed=True, partition=partition,
                metadata={{"rows": 62, "partition_range": partition}},
            )
    for check in context.selected_asset_check_keys:
        name = context.assets_def.get_output_name_for_asset_check_key(check)
        yield dg.Output(None, output_name=name)


defs = dg.Definitions(assets=[daily], resources={{"io_manager": Nothing()}},
                      executor=dg.in_process_executor)
"""


def _profile(name: str, url: str | None) -> str:
    if name == STOCK_SQLITE:
        storage = "storage:\n  sqlite:\n    base_dir:\n      env: DAGSTER_HOME\n"
    elif name == KEPT_SQLITE:
        storage = (
            "storage:\n  custom:\n    module: idem_assets.instance.sqlite\n    class: SqliteStorage"
            "\n    config:\n      base_dir:\n        env: DAGSTER_HOME\n"
        )
    else:
        assert url is not None
        url = url.replace("postgresql://", "postgresql+psycopg2://")
        storage = (
            f"storage:\n  postgres:\n    postgres_url: {url}\n"
            if name == STOCK_PG
            else "storage:\n  custom:\n    module: idem_assets.instance.postgres\n"
            f"    class: PostgresStorage\n    config:\n      postgres_url: {url}\n"
        )
    return storage + "telemetry:\n  enabled: false\n"


def _commit_without_waiting(url: str | None) -> None:
    """``ALTER DATABASE ... SET synchronous_commit = off``: a commit returns before its WAL
    record is on disk (a server crash can lose the last commits, never corrupt the data)."""
    import psycopg
    from psycopg import sql

    assert url is not None
    name = url.rsplit("/", 1)[-1]
    with psycopg.connect(url, autocommit=True) as conn:
        statement = sql.SQL("ALTER DATABASE {} SET synchronous_commit = off")
        conn.execute(statement.format(sql.Identifier(name)))


def _server_cpu(root: Path | None) -> float:
    """CPU seconds of a PostgreSQL server so far: the postmaster, its live and reaped children."""
    if root is None:
        return 0.0
    import psutil

    pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
    master = psutil.Process(pid)
    times = master.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in master.children():
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.NoSuchProcess:
            continue
    return total


def _run(project: Path, home: Path, select: str, days: int, server: Path | None) -> dict:
    """One ``dagster asset materialize`` of the range: wall, client CPU, server CPU."""
    import datetime as dt

    last = (dt.date.fromisoformat(FIRST) + dt.timedelta(days=days - 1)).isoformat()
    env = {**os.environ, "DAGSTER_HOME": str(home), "NO_COLOR": "1"}
    argv = [str(Path(sys.executable).with_name("dagster")), "asset", "materialize"]
    argv += ["-f", str(project), "--select", select, "--partition-range", f"{FIRST}...{last}"]
    before_server = _server_cpu(server)
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, cwd=project.parent, check=False)
    wall = time.perf_counter() - started
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode(errors="replace")[-2000:])
    client = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return {"wall": wall, "cpu": client, "server": _server_cpu(server) - before_server}


def _home(work: Path, profile: str) -> Path:
    home = Path(tempfile.mkdtemp(dir=work))
    (home / "dagster.yaml").write_text(profile)
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    code = "import dagster as dg\ni = dg.DagsterInstance.get()\ni.get_runs(limit=1)\ni.dispose()\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    return home


def run_family(quick: bool) -> tuple[str, dict[str, Any]]:
    """The markdown section (without its ## heading) and the numbers."""
    from idem_assets_tests.fixtures.postgres import running_postgres

    days = QUICK_DAYS if quick else DAYS
    work = Path(tempfile.mkdtemp(prefix="bench-instance-"))
    projects = {"with checks": work / "checks.py", "without": work / "nochecks.py"}
    projects["with checks"].write_text(PROJECT.format(first=FIRST, checks=CHECKS))
    projects["without"].write_text(PROJECT.format(first=FIRST, checks=0))
    measured: dict[str, dict[str, dict]] = {}
    load_before = os.getloadavg()[0]
    try:
        with running_postgres(durable=True) as server:
            for name in ORDER:
                pg = name in POSTGRES
                runs = {}
                for label, project in projects.items():
                    url = server.create_database("instance") if pg else None
                    if name == KEPT_PG_ASYNC:
                        _commit_without_waiting(url)
                    home = _home(work, _profile(name, url))
                    runs[label] = _run(project, home, "daily", days, server.root if pg else None)
                    shutil.rmtree(home, ignore_errors=True)
                measured[name] = runs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    numbers: dict[str, Any] = {"days": days, "checks": CHECKS, "measured": measured}
    rows = []
    per_event: dict[str, dict[str, float]] = {}
    evaluations = days * CHECKS
    for name in ORDER:
        runs = measured[name]
        on, off = runs["with checks"], runs["without"]
        cost = {key: 1000 * (on[key] - off[key]) / evaluations for key in ("wall", "cpu", "server")}
        mat = {key: 1000 * off[key] / days for key in ("wall", "cpu", "server")}
        per_event[name] = cost
        rows.append(
            [
                name,
                f"{cost['cpu']:.2f}",
                f"{cost['server']:.2f}" if name in POSTGRES else "—",
                f"{cost['wall']:.2f}",
                f"{mat['cpu']:.2f}",
                f"{on['wall']:.1f}",
                f"{off['wall']:.1f}",
            ]
        )
    numbers["per_event"] = per_event
    load = (load_before, os.getloadavg()[0])
    text = (
        f"A daily asset over {days} days as one `dagster asset materialize` range, with "
        f"{CHECKS} partitioned checks reported for every day ({evaluations:,} evaluations) and "
        "without checks, each in a fresh instance (code: `benchmarks/cases/instance_cost.py`). "
        "Per check evaluation: the difference between the two runs ÷ the evaluations; per "
        f"materialization: the run without checks ÷ {days} (its run's own start and end "
        "included). PostgreSQL 15 on loopback with its durable defaults; its CPU counted "
        f"apart. Load average (1 min) {load[0]:.2f} before, {load[1]:.2f} after, on "
        f"{os.cpu_count()} cores.\n\n"
        + table(
            [
                "instance storage",
                "per evaluation: client CPU ms",
                "server CPU ms",
                "wall ms",
                "per materialization with its run: client CPU ms",
                f"{evaluations:,} evaluations: wall s",
                "no checks: wall s",
            ],
            rows,
        )
        + "\n"
    )
    return text, numbers
