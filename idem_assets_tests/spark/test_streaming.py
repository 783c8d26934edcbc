"""A stream killed between its Delta commit and Spark's checkpoint still lands every event once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from idem_assets_tests.spark.stream_child import APP_ID, KILL_ENV, TABLE

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
EVENTS_PER_FILE = 20


def _write_events_file(stream_dir: Path, index: int) -> None:
    """One JSON Lines file of events, written via a hidden name and renamed (as producers do)."""
    lines = [
        json.dumps(
            {
                "event_id": f"evt-{index:02d}-{n:03d}",
                "customer_id": n % 7,
                "event_type": "page_view",
                "event_time": f"2024-03-0{1 + n % 3}T10:{n % 60:02d}:00Z",
                "ingested_at": "2024-03-04T00:00:00+01:00",
                "payload": json.dumps({"n": n}),
            }
        )
        for n in range(EVENTS_PER_FILE)
    ]
    staging = stream_dir / f".part-{index:02d}.jsonl.tmp"
    staging.write_text("\n".join(lines) + "\n")
    staging.rename(stream_dir / f"part-{index:02d}.jsonl")


def _run_child(paths: list[Path], kill_after: int | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    if kill_after is not None:
        env[KILL_ENV] = str(kill_after)
    child = subprocess.run(
        [sys.executable, "-m", "idem_assets_tests.spark.stream_child", *map(str, paths)],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        timeout=300,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.returncode in (0, -9), child.stderr[-3000:]
    return child.returncode


def _count(table: DeltaTable, sql: str) -> int:
    result = pa.table(QueryBuilder().register("t", table).execute(sql).read_all())
    return int(result.column(0)[0].as_py())


def test_sigkill_after_commit_before_checkpoint_then_restart_lands_each_event_once(tmp_path):
    stream_dir, lake, checkpoint = tmp_path / "events_stream", tmp_path / "lake", tmp_path / "ck"
    log = tmp_path / "batches.jsonl"
    stream_dir.mkdir()
    for index in range(4):
        _write_events_file(stream_dir, index)
    paths = [stream_dir, lake, checkpoint, log]

    assert _run_child(paths, kill_after=1) == -9
    table = DeltaTable(str(lake / TABLE))
    assert table.transaction_version(APP_ID) == 1
    assert _count(table, "SELECT COUNT(*) FROM t") == 2 * EVENTS_PER_FILE
    # Spark planned batch 1 but never recorded it as done: a restart must replay it.
    assert (checkpoint / "offsets" / "1").exists()
    assert not (checkpoint / "commits" / "1").exists()

    _write_events_file(stream_dir, 4)  # more data arrives while the stream is down
    assert _run_child(paths, kill_after=None) == 0

    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(d["batch"], d["committed"]) for d in decisions] == [
        (0, True),
        (1, True),
        (1, False),
        (2, True),
        (3, True),
        (4, True),
    ]
    table = DeltaTable(str(lake / TABLE))
    files_events = 5 * EVENTS_PER_FILE
    assert _count(table, "SELECT COUNT(*) FROM t") == files_events
    assert _count(table, "SELECT COUNT(DISTINCT event_id) FROM t") == files_events
    assert table.transaction_version(APP_ID) == 4
    assert table.metadata().partition_columns == ["event_date"]
