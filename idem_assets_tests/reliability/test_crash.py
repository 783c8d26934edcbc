"""SIGKILL a materialization at its most dangerous points, rerun it, and compare with a clean run.

Every scenario loads day 1 into a fresh lake, runs the daily job for day 2 in a child
process that dies of SIGKILL at one point, reruns day 2 in a new process, and then
compares every table with a lake that loaded the same two days without a fault.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import write_deltalake

from idem_assets.checkpoint import Status
from idem_assets.io_manager.tracking import LEASE_TOKEN_KEY
from idem_assets.lake import read_rows
from idem_assets_tests.checkpoint.clock import lease_lead
from idem_assets_tests.harness import Project
from idem_assets_tests.reliability.watch import kill_between_files_and_commit
from idem_assets_tests.reliability.world import (
    ChildOutcome,
    compare_lakes,
    project_at,
    record_row,
    run_child,
    spawn_runs,
    trackers,
    unsettled_lake_records,
)

pytestmark = pytest.mark.slow

DAY1, DAY2 = "2024-03-01", "2024-03-02"
WINDOW2 = "2024-03-02..2024-03-03"
JOB = "daily_lake_job"
# Long: no run waits for a lease to run out; a rerun's clock starts past the dead run's.
LEASE = {"write_lease_seconds": 60.0}
WATCH_ATTEMPTS = 5

# scenario -> (crash point, asset whose write it interrupts, the table commit lands?)
CRASH_POINTS = {
    "before_write": ("lake.before_write/orders", "orders", False),
    "after_commit_overwrite": ("lake.after_commit/orders", "orders", True),
    "merge_planned": ("lake.merge_planned/customers", "customers", False),
    "after_commit_merge": ("lake.after_commit/events", "events", True),
}
# scenario -> (table watched, what delta-rs is doing when the parent kills the child)
UNCOMMITTED_FILES = {
    "files_before_commit": ("orders", "partition overwrite"),
    "mid_merge": ("events", "MERGE"),
}


@pytest.fixture(scope="module")
def clean(landing: Path, tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Days 1 and 2 loaded without any fault: the state every recovery must reach."""
    project = project_at(tmp_path_factory.mktemp("clean"), landing)
    for day in (DAY1, DAY2):
        assert project.run_days(day).success
    return project


def day1_loaded(root: Path, landing: Path) -> Project:
    """A fresh lake holding day 1 (loaded cleanly, in this process)."""
    project = project_at(root, landing)
    assert project.run_days(DAY1).success
    return project


def recover(project: Project, work: Path) -> ChildOutcome:
    """Rerun day 2 in a new process whose store clock is past the dead run's leases; it must
    pass every check."""
    ahead = lease_lead(project.checkpoint.resolved_url)
    rerun = run_child(project, work, JOB, [DAY2], clock_ahead=ahead, **LEASE)
    assert rerun.returncode == 0, rerun.tail()
    outcome = rerun.runs[0]
    assert outcome["success"], outcome["errors"]
    assert outcome["checks"] and all(outcome["checks"].values()), outcome["checks"]
    assert any(c.endswith(":conservation") for c in outcome["checks"])
    return rerun


def crashed_record(project: Project, asset: str, run_id: str):
    """The checkpoint record of the dead run's write of ``asset`` for day 2."""
    prefix = f"{WINDOW2}/{run_id}"
    found = [
        t
        for t in trackers(project.checkpoint.resolved_url, f"lake/{asset}")
        if t.record_id == prefix or t.record_id.startswith(f"{prefix}/")
    ]
    assert len(found) == 1, found
    return found[0]


def assert_converged(
    project: Project, clean: Project, scenario: str, faults: str, **details
) -> None:
    """Same tables as the clean lake, nothing unsettled; then record the report row."""
    comparison = compare_lakes(project.lake, clean.lake)
    assert unsettled_lake_records(project.checkpoint.resolved_url) == []
    record_row(
        "crash",
        scenario,
        runs=2,
        faults=faults,
        equal=comparison.equal,
        duplicates=comparison.duplicates,
        lost=comparison.lost,
        extra_rows=comparison.extra,
        **details,
    )
    assert comparison.equal, comparison
    assert (comparison.duplicates, comparison.lost, comparison.extra) == (0, 0, 0)


@pytest.mark.parametrize("scenario", list(CRASH_POINTS))
def test_sigkill_at_a_crash_point_then_rerun_converges(scenario, landing, clean, tmp_path):
    point, asset, commits = CRASH_POINTS[scenario]
    project = day1_loaded(tmp_path / "lake", landing)
    version_before = project.version(asset)
    crashed = spawn_runs(project, tmp_path / "work", JOB, [DAY2], crash_at=point, **LEASE)
    dead = crashed.wait()
    assert dead.killed, dead.tail()
    assert dead.crash_points() == [f"{point}:1"]

    # At death the write record is in progress, and the commit exists only past the commit.
    record = crashed_record(project, asset, crashed.run_ids[0])
    assert record.status == Status.IN_PROGRESS
    history = project.lake.table(asset).open().history(5)
    tokens = {entry.get(LEASE_TOKEN_KEY): entry["version"] for entry in history}
    assert (record.lease_token in tokens) is commits
    assert project.version(asset) == version_before + (1 if commits else 0)

    rerun = recover(project, tmp_path / "work")
    assert rerun.runs[0]["assets"][asset]["reconciled_records"] == 1
    settled = crashed_record(project, asset, crashed.run_ids[0])
    if commits:
        assert settled.status == Status.SUCCEEDED
        assert settled.result["reconciled"] is True
        assert settled.result["version"] == tokens[record.lease_token]
    else:
        assert settled.status == Status.IGNORED
        assert "before its Delta commit" in settled.ignored_reason
    assert_converged(
        project, clean, scenario, f"SIGKILL at {point}", crashed_record=settled.status.value
    )


@pytest.mark.parametrize("scenario", list(UNCOMMITTED_FILES))
def test_sigkill_with_data_files_written_but_not_committed(scenario, landing, clean, tmp_path):
    table, doing = UNCOMMITTED_FILES[scenario]
    for attempt in range(1, WATCH_ATTEMPTS + 1):
        project = day1_loaded(tmp_path / f"lake-{attempt}", landing)
        child = spawn_runs(project, tmp_path / "work", JOB, [DAY2], **LEASE)
        kill = kill_between_files_and_commit(child.process, Path(project.lake.lake_root) / table)
        if kill.hit:
            break
    else:
        raise AssertionError(
            f"the {doing} committed before the watcher could kill it, {WATCH_ATTEMPTS} times"
        )
    assert kill.new_files >= 1 and kill.version_after == kill.version_before
    assert project.version(table) == kill.version_before  # orphan files, no commit
    record = crashed_record(project, table, child.run_ids[0])
    assert record.status == Status.IN_PROGRESS

    rerun = recover(project, tmp_path / "work")
    assert rerun.runs[0]["assets"][table]["reconciled_records"] == 1
    assert crashed_record(project, table, child.run_ids[0]).status == Status.IGNORED
    assert_converged(
        project,
        clean,
        scenario,
        f"SIGKILL during {doing}: {kill.new_files} Parquet file(s) written, no log entry",
        watcher_attempts=attempt,
        crashed_record="ignored",
    )


def test_the_comparison_sees_lost_duplicated_and_extra_rows(landing, clean, tmp_path):
    partial = day1_loaded(tmp_path / "partial", landing)
    missing_day = compare_lakes(partial.lake, clean.lake, ["orders"])
    assert not missing_day.equal and missing_day.lost > 0 and missing_day.differing == ("orders",)
    assert compare_lakes(clean.lake, partial.lake, ["orders"]).extra == missing_day.lost
    one_row = read_rows(partial.lake.table("orders").open()).slice(0, 1)
    write_deltalake(partial.lake.table("orders").uri, one_row, mode="append")
    doubled = compare_lakes(partial.lake, clean.lake, ["orders"])
    assert doubled.duplicates == 1 and not doubled.equal
