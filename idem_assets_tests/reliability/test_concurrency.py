"""Concurrent materializations from separate processes end in the state of one clean run."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets_tests.harness import DAILY_TABLES, Project, materialization_metadata
from idem_assets_tests.reliability.world import (
    Child,
    ChildOutcome,
    compare_lakes,
    project_at,
    record_row,
    spawn_runs,
    unsettled_lake_records,
)
from idem_assets_tests.waiting import alive, wait_until

pytestmark = pytest.mark.slow

DAY1, DAY2, DAY4 = "2024-03-01", "2024-03-02", "2024-03-04"
JOB = "daily_lake_job"
# Words a run that lost a commit race may fail with; anything else is a bug.
CONFLICT_WORDS = ("conflict", "concurrent", "commit failed", "already exists")


@pytest.fixture(scope="module")
def clean(landing: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Project]:
    """Reference lakes loaded by one clean run each: day 1; days 1-2; days 1-4 in one run."""
    lakes = {}
    for name, runs in {"day1": [DAY1], "day2": [DAY1, DAY2], "range": [(DAY1, DAY4)]}.items():
        project = project_at(tmp_path_factory.mktemp(f"clean-{name}"), landing)
        for run in runs:
            first, last = run if isinstance(run, tuple) else (run, None)
            assert project.run_days(first, last).success
        lakes[name] = project
    return lakes


def start_together(children: list[Child], ready: list[Path], go: Path) -> list[ChildOutcome]:
    """Release children that wait for ``go`` once all are ready; collect their outcomes."""
    wait_until(
        lambda: (
            all(alive(c.process, "a child while starting", c.stderr_tail) for c in children)
            and all(r.exists() for r in ready)
        ),
        "every child to be ready",
        seen=lambda: [r.name for r in ready if r.exists()],
    )
    go.touch()
    return [child.wait() for child in children]


def race(
    project: Project, work: Path, runs_per_child: list[list[str | list[str]]]
) -> list[ChildOutcome]:
    """One child per entry, each executing its runs in order, all released at once."""
    go = work / "go"
    children, ready = [], []
    for n, runs in enumerate(runs_per_child):
        ready.append(work / f"ready-{n}")
        children.append(
            spawn_runs(project, work, JOB, runs, go_file=str(go), ready_file=str(ready[-1]))
        )
    return start_together(children, ready, go)


def judge(outcomes: list[ChildOutcome]) -> tuple[int, int, int, int]:
    """(runs succeeded, runs failed on a lost race, most attempts of one write, commits)."""
    succeeded = failed = attempts = commits = 0
    for outcome in outcomes:
        assert outcome.returncode == 0, outcome.tail()
        for run in outcome.runs:
            if run["success"]:
                succeeded += 1
                assert all(run["checks"].values()), run["checks"]
            else:
                failed += 1
                assert run["errors"], run
                for error in run["errors"]:
                    assert any(w in error.lower() for w in CONFLICT_WORDS), error
            for metadata in run["assets"].values():
                attempts = max(attempts, int(metadata.get("write_attempts", 1)))
                commits += bool(metadata.get("committed"))
    return succeeded, failed, attempts, commits


def verify_rerun_is_a_no_op(project: Project, first: str, last: str | None = None) -> None:
    """After the race, one more run commits nothing and passes every check."""
    again = project.run_days(first, last)
    assert again.success
    metadata = materialization_metadata(again)
    assert {asset: m["committed"] for asset, m in metadata.items()} == {
        asset: False for asset in DAILY_TABLES
    }
    assert unsettled_lake_records(project.checkpoint.resolved_url) == []


def report(
    scenario: str,
    project: Project,
    reference: Project,
    runs: int,
    outcomes: list[ChildOutcome],
    faults: str,
) -> int:
    """Compare with the clean lake, record the row, require equality; returns the commits."""
    succeeded, failed, attempts, commits = judge(outcomes)
    comparison = compare_lakes(project.lake, reference.lake)
    record_row(
        "concurrency",
        scenario,
        runs=runs,
        faults=faults,
        equal=comparison.equal,
        duplicates=comparison.duplicates,
        lost=comparison.lost,
        extra_rows=comparison.extra,
        runs_succeeded=succeeded,
        runs_failed_on_conflict=failed,
        max_write_attempts=attempts,
        table_commits=commits,
    )
    assert comparison.equal, comparison
    assert (comparison.duplicates, comparison.lost, comparison.extra) == (0, 0, 0)
    assert succeeded >= 1
    return commits


@pytest.mark.parametrize(
    ("workers", "backend", "loaded"),
    [
        pytest.param(2, "sqlite", False, id="2-sqlite-new-tables"),
        pytest.param(4, "sqlite", False, id="4-sqlite-new-tables"),
        pytest.param(4, "sqlite", True, id="4-sqlite-existing-tables"),
        pytest.param(
            2, "postgresql", True, id="2-postgresql-existing-tables", marks=pytest.mark.postgres
        ),
    ],
)
def test_concurrent_runs_of_one_partition_equal_one_clean_run(
    workers, backend, loaded, landing, clean, tmp_path, request
):
    url = request.getfixturevalue("fresh_postgres_url") if backend == "postgresql" else None
    project = project_at(tmp_path / "lake", landing, url)
    if loaded:
        assert project.run_days(DAY1).success
    day = DAY2 if loaded else DAY1
    outcomes = race(project, tmp_path / "work", [[day]] * workers)
    scenario = f"same_partition_x{workers}_{backend}_{'existing' if loaded else 'new'}_tables"
    commits = report(
        scenario,
        project,
        clean["day2" if loaded else "day1"],
        workers,
        outcomes,
        f"{workers} processes materialize {day} at once",
    )
    assert commits == len(DAILY_TABLES)  # one writer commits each table, the rest find it done
    verify_rerun_is_a_no_op(project, day)


def test_backfill_range_while_its_partitions_are_rematerialized(landing, clean, tmp_path):
    project = project_at(tmp_path / "lake", landing)
    days = ["2024-03-04", "2024-03-03", "2024-03-02", "2024-03-01"]
    outcomes = race(project, tmp_path / "work", [[[DAY1, DAY4]], days])
    report(
        "backfill_range_vs_single_partitions",
        project,
        clean["range"],
        1 + len(days),
        outcomes,
        "single-run backfill of 4 days racing 4 single-partition runs",
    )
    verify_rerun_is_a_no_op(project, DAY1, DAY4)
