"""Full disks: a write that cannot grow its file fails the run cleanly, and a rerun converges.

Each run is a process with ``RLIMIT_FSIZE`` (``disk_child.py``): growing any file past the
limit fails with EFBIG, as a full disk fails a write. Staging the day's Parquet file, and
writing the SQLite checkpoint, are each made to fail. After each: the run fails with the
operating system's error, the table is untouched (absent, or its last version with its
rows), no checkpoint record is left in progress, and a run with room again converges to
what a clean load of the same landing files holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.lake import LakeTable, fingerprint, read_rows
from idem_assets_tests.harness import new_project
from idem_assets_tests.processes import run_python
from idem_assets_tests.reliability.world import record_row

DAY = "2024-03-01"
# Smaller than the day's orders Parquet file (~9 KB), larger than its Delta log entry.
NO_ROOM_FOR_PARQUET = 4096


def _run(root: Path, state_url: str, limit: int = 0) -> dict:
    done = run_python(
        "-m",
        "idem_assets_tests.reliability.disk_child",
        str(root),
        state_url,
        DAY,
        str(limit),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _orders(root: Path) -> tuple[int, str] | None:
    table = LakeTable(str(root / "lake" / "orders")).open()
    if table is None:
        return None
    return table.version(), str(fingerprint(read_rows(table)))


def _statuses(state_url: str) -> list[Status]:
    with open_store(state_url) as store:
        return [tracker.status for tracker in store.list("lake/orders")]


@pytest.fixture
def clean(tmp_path_factory) -> tuple[int, str]:
    """The orders table after one unhindered run over the same landing files."""
    root = tmp_path_factory.mktemp("clean")
    new_project(root, days=2)
    assert _run(root, f"sqlite:///{root / 'state.db'}")["success"]
    state = _orders(root)
    assert state is not None
    return state


def test_no_room_for_the_first_parquet_file_leaves_no_table(tmp_path, fresh_postgres_url, clean):
    new_project(tmp_path, days=2)
    failed = _run(tmp_path, fresh_postgres_url, NO_ROOM_FOR_PARQUET)
    assert not failed["success"]
    assert "File too large" in failed["errors"][0] or "os error 27" in failed["errors"][0]
    assert _orders(tmp_path) is None
    assert _statuses(fresh_postgres_url) == [Status.FAILED]

    assert _run(tmp_path, fresh_postgres_url)["success"]
    assert _orders(tmp_path) == (0, clean[1])
    assert Status.IN_PROGRESS not in _statuses(fresh_postgres_url)
    _row("first_parquet_file", "no room for the first Parquet file (RLIMIT_FSIZE 4 KiB)")


def test_no_room_for_a_changed_day_keeps_the_stored_version(tmp_path, fresh_postgres_url):
    project = new_project(tmp_path, days=2)
    assert _run(tmp_path, fresh_postgres_url)["success"]
    before = _orders(tmp_path)
    # A late re-delivery changes the day: the next run has to write.
    late = project.landing / "orders" / f"date={DAY}" / "zz-late.csv"
    late.write_text(
        "order_id,customer_id,amount,status,order_date,updated_at\n"
        f"999999,1,5.00,paid,{DAY},{DAY}T23:00:00Z\n"
    )
    failed = _run(tmp_path, fresh_postgres_url, NO_ROOM_FOR_PARQUET)
    assert not failed["success"]
    assert _orders(tmp_path) == before  # not emptied, not half-written

    assert _run(tmp_path, fresh_postgres_url)["success"]
    version, stored = _orders(tmp_path)  # type: ignore[misc]
    assert version == before[0] + 1  # type: ignore[index]
    clean_root = tmp_path / "clean"
    clean_project = new_project(clean_root, days=2)
    (clean_project.landing / "orders" / f"date={DAY}" / "zz-late.csv").write_text(late.read_text())
    assert _run(clean_root, f"sqlite:///{clean_root / 'state.db'}")["success"]
    assert stored == _orders(clean_root)[1]  # type: ignore[index]
    assert Status.IN_PROGRESS not in _statuses(fresh_postgres_url)
    _row("changed_day_parquet_file", "no room for a changed day's Parquet file (4 KiB)")


def test_no_room_for_the_sqlite_checkpoint_fails_before_the_lake_is_touched(tmp_path, clean):
    new_project(tmp_path, days=2)
    url = f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"
    assert _run(tmp_path, url)["success"]  # the store exists; it cannot grow now
    before = _orders(tmp_path)
    (tmp_path / "landing" / "orders" / f"date={DAY}" / "zz-late.csv").write_text(
        "order_id,customer_id,amount,status,order_date,updated_at\n"
        f"999999,1,5.00,paid,{DAY},{DAY}T23:00:00Z\n"
    )
    failed = _run(tmp_path, url, 16_000)
    assert not failed["success"]
    assert "cannot open checkpoint database" in failed["errors"][0]
    assert "disk I/O error" in failed["errors"][0]
    assert _orders(tmp_path) == before

    assert _run(tmp_path, url)["success"]
    assert _orders(tmp_path)[0] == before[0] + 1  # type: ignore[index]
    assert Status.IN_PROGRESS not in _statuses(url)
    assert _statuses(url).count(Status.SUCCEEDED) == 2
    _row("sqlite_checkpoint", "no room for the SQLite checkpoint's WAL (RLIMIT_FSIZE 16 kB)")


def _row(scenario: str, faults: str) -> None:
    # Reached only when every assertion above held: the row records a converged scenario.
    record_row("disk_full", scenario, runs=2, faults=faults, equal=True, duplicates=0, lost=0)
