"""Compaction, vacuum and checkpoints change files, never content, and lose no write."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time

import pyarrow as pa
import pytest

from idem_assets.lake import LakeTable, append_exactly_once, fingerprint, read_rows, txn_version
from idem_assets.lake.maintenance import (
    MIN_RETENTION_HOURS,
    MaintenanceError,
    checkpoint,
    compact,
    vacuum,
)
from idem_assets.lake.overwrite import overwrite_partitions
from idem_assets.lake.stored import table_fingerprint
from idem_assets_tests.waiting import WAIT_SECONDS

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("value", pa.string())])
DAYS = (dt.date(2024, 3, 1), dt.date(2024, 3, 2))
APP = "maintenance-test"


def _batch(number: int, day: dt.date, rows: int = 20, offset: int = 0) -> pa.Table:
    ids = range(number * 1000 + offset, number * 1000 + offset + rows)
    return pa.table(
        {"id": list(ids), "day": [day] * rows, "value": [f"b{number}"] * rows}, schema=SCHEMA
    )


def _appended(target: LakeTable, batches: int) -> None:
    for number in range(1, batches + 1):
        append_exactly_once(
            target, _batch(number, DAYS[number % 2]), APP, number, partition_column="day"
        )


def _files(target: LakeTable) -> int:
    table = target.open()
    assert table is not None
    return len(table.file_uris())


def test_compaction_merges_small_files_and_keeps_content_and_txn(tmp_path):
    target = LakeTable(str(tmp_path / "appended"))
    _appended(target, 6)
    before, version = table_fingerprint(target), target.open().version()
    assert _files(target) == 6 and before.rows == 120

    done = compact(target)

    assert done.committed and done.version == version + 1
    assert (done.files_removed, done.files_added) == (6, 2) and _files(target) == 2
    assert table_fingerprint(target) == before
    # The txn ids survive: a replay of an appended batch still commits nothing.
    assert txn_version(target.open(), APP) == 6
    replay = append_exactly_once(target, _batch(3, DAYS[1]), APP, 3, partition_column="day")
    assert not replay.committed and table_fingerprint(target) == before
    # Time travel to the version before compaction reads the same rows.
    assert fingerprint(read_rows(target.open(version))) == before
    # Nothing left to merge: no new version.
    again = compact(target)
    assert not again.committed and target.open().version() == done.version


def test_z_order_rewrites_split_partitions_only(tmp_path):
    target = LakeTable(str(tmp_path / "ordered"))
    for day in DAYS:
        overwrite_partitions(target, _batch(1, day), "day", day, day + dt.timedelta(days=1))
    version = target.open().version()
    # One file per partition: a Z-order would rewrite the same rows every night.
    assert not compact(target, z_order=["id"]).committed
    assert target.open().version() == version
    _appended(target, 2)
    before = table_fingerprint(target)
    done = compact(target, z_order=["value"])
    assert done.committed and done.z_order == ("value",)
    assert table_fingerprint(target) == before and _files(target) == 2


def test_vacuum_keeps_recent_versions_and_running_writes_and_deletes_old_leftovers(tmp_path):
    target = LakeTable(str(tmp_path / "vacuumed"))
    _appended(target, 4)
    first = target.open().version()
    compact(target)
    # A crashed write's leftover from ten days ago, and a write staging files right now.
    old = tmp_path / "vacuumed" / "day=2024-03-01" / "part-crashed-00000.parquet"
    young = tmp_path / "vacuumed" / "stream-running" / "part-00000.parquet"
    for path in (old, young):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1 not referenced by the log PAR1")
    ten_days_ago = time.time() - 10 * 24 * 3600
    os.utime(old, (ten_days_ago, ten_days_ago))

    with pytest.raises(MaintenanceError, match="below 168 h: readers and time-travel"):
        vacuum(target, 24)
    cleared = vacuum(target, MIN_RETENTION_HOURS)

    assert [p.rsplit("/", 1)[-1] for p in cleared.files] == [old.name]
    assert not old.exists() and young.exists()
    # The files compaction removed are younger than the retention: time travel still reads.
    assert read_rows(target.open(first)).num_rows == 80


def test_checkpoint_keeps_the_table_readable_at_its_version(tmp_path):
    target = LakeTable(str(tmp_path / "checkpointed"))
    _appended(target, 3)
    before = table_fingerprint(target)
    version = checkpoint(target)
    assert version == target.open().version()
    log = tmp_path / "checkpointed" / "_delta_log"
    assert (log / f"{version:020d}.checkpoint.parquet").exists()
    assert table_fingerprint(LakeTable(str(tmp_path / "checkpointed"))) == before
    assert txn_version(target.open(), APP) == 3


def test_compaction_running_beside_writers_loses_and_duplicates_nothing(tmp_path):
    """Appends and day overwrites race a compaction loop; the end state is exact."""
    target = LakeTable(str(tmp_path / "raced"))
    _appended(target, 2)
    stop = threading.Event()
    errors: list[BaseException] = []
    compactions: list[bool] = []

    def compacting() -> None:
        while not stop.is_set():
            try:
                compactions.append(compact(target).committed)
            except BaseException as error:  # reported below
                errors.append(error)
                return

    def writing() -> None:
        try:
            for number in range(3, 15):
                append_exactly_once(
                    target, _batch(number, DAYS[1]), APP, number, partition_column="day"
                )
                # The other day is rewritten each time: its files vanish under compaction.
                overwrite_partitions(
                    target, _batch(number, DAYS[0], rows=5, offset=500), "day", DAYS[0], DAYS[1]
                )
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=compacting), threading.Thread(target=writing)]
    threads[0].start()
    threads[1].start()
    threads[1].join(timeout=WAIT_SECONDS)
    stop.set()
    threads[0].join(timeout=WAIT_SECONDS)
    assert not errors, errors
    alive = [
        name for name, t in zip(("compaction", "writes"), threads, strict=True) if t.is_alive()
    ]
    assert not alive, f"gave up after {WAIT_SECONDS:.0f} s waiting for the {alive} thread to end"

    compact(target)
    rows = read_rows(target.open())
    # Day 2: every appended batch once; day 1: exactly the last overwrite.
    expected = pa.concat_tables(
        [
            _batch(1, DAYS[1]),
            *(_batch(n, DAYS[1]) for n in range(3, 15)),
            _batch(14, DAYS[0], rows=5, offset=500),
        ]
    )
    assert fingerprint(rows) == fingerprint(expected)
    assert rows.num_rows == len(set(rows.column("id").to_pylist()))
    assert txn_version(target.open(), APP) == 14
    assert any(compactions), "no compaction committed while the writers ran"
