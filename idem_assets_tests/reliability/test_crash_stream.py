"""SIGKILL a stream ingester mid batch, restart it, and compare with an uninterrupted ingest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from idem_assets.faults import CRASH_ENV, CRASH_MARKER
from idem_assets.lake import LakeTable, fingerprint, read_rows
from idem_assets.sample import EVENTS_STREAM
from idem_assets.sample.stream_files import append_stream_files
from idem_assets_tests.checkpoint.clock import lease_lead
from idem_assets_tests.reliability.stream_child import drain
from idem_assets_tests.reliability.world import PROJECT_ROOT, record_row

pytestmark = pytest.mark.slow

FILES, EVENTS, SEED = 8, 30, 11  # four batches of two files; some rows are quarantined
# scenario -> crash point (the N-th time any batch reaches the step)
POINTS = {
    "stream_between_files": "stream.file_read:3",  # batch 1 read one of its two files
    "stream_committed_not_settled": "stream.committed:2",  # batch 1 in the table, no tracker
}


def stream_child(
    landing: Path,
    lake: Path,
    url: str,
    crash_at: str | None = None,
    clock_ahead: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the stream child process to its end (or its death); with ``clock_ahead`` its
    store's clock runs that many seconds ahead of the database's."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop(CRASH_ENV, None)
    if crash_at:
        env[CRASH_ENV] = crash_at
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "idem_assets_tests.reliability.stream_child",
            str(landing),
            str(lake),
            url,
            *([] if clock_ahead is None else [str(clock_ahead)]),
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def stream_rows(lake: Path, table: str):
    """Rows of a table of the stream's lake (the stream's table or the quarantine)."""
    return read_rows(LakeTable(str(lake / table)).open())


@pytest.mark.parametrize("scenario", list(POINTS))
def test_sigkill_mid_stream_batch_then_restart_ingests_each_event_once(scenario, tmp_path):
    landing = tmp_path / "landing"
    files = append_stream_files(landing, FILES, EVENTS, SEED, defects=True)
    expected = set().union(*(f.valid_keys() for f in files))
    clean_lake = tmp_path / "clean"
    drain(str(landing), str(clean_lake), f"sqlite:///{tmp_path / 'clean.db'}", observe=False)

    lake, url = tmp_path / "lake", f"sqlite:///{tmp_path / 'state.db'}"
    dead = stream_child(landing, lake, url, crash_at=POINTS[scenario])
    assert dead.returncode == -9, dead.stderr[-2000:]
    assert f"{CRASH_MARKER} {POINTS[scenario]}" in dead.stderr
    # The restart's clock starts past the dead child's lease: nothing is waited out.
    restarted = stream_child(landing, lake, url, clock_ahead=lease_lead(url))
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    assert int(restarted.stdout.split()[-1]) == FILES // 2 - 1  # batch 0 finished before

    rows = stream_rows(lake, EVENTS_STREAM.name)
    keys = list(
        zip(
            rows.column("event_id").to_pylist(), rows.column("ingested_at").to_pylist(), strict=True
        )
    )
    duplicates, lost = len(keys) - len(set(keys)), len(expected - set(keys))
    equal = all(
        fingerprint(stream_rows(lake, t)) == fingerprint(stream_rows(clean_lake, t))
        for t in (EVENTS_STREAM.name, "quarantine")
    )
    record_row(
        "crash",
        scenario,
        runs=2,
        faults=f"SIGKILL at {POINTS[scenario]}",
        equal=equal and duplicates == 0,
        duplicates=duplicates,
        lost=lost,
        extra_rows=len(set(keys) - expected),
    )
    assert equal
    assert duplicates == lost == 0 and set(keys) == expected
