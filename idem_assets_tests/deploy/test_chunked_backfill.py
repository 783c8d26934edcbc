"""A declaration's ``backfill: {max_days_per_run: 10, writers: 2}``, under Dagster's real
backfill daemon logic (``execute_backfill_iteration`` against a SQLite instance whose runs
run synchronously in process; see ``backfill_child``).

Proves that a 30-day backfill of ``orders`` is 3 runs of 10 days, each a partition range,
whose table equals a single-run load of the same days; that a backfill SIGKILLed just
before its second chunk's write, then launched again, recomputes nothing for the chunk
that committed (proven from metadata) and commits the two others, to the same table; that
a further backfill commits nothing; and that ``idem-assets pools --apply`` sets the pool
limit the declaration's ``writers`` names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from idem_assets.cli.pools import apply_writers, declared_writers
from idem_assets.lake import Fingerprint, LakeTable, fingerprint, read_rows
from idem_assets.partitions import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG
from idem_assets.sample.generator import generate
from idem_assets_tests.deploy.backfill_child import (
    backfill_runs,
    location_definitions,
    new_instance,
    run_backfill,
    run_metadata,
    write_location,
)
from idem_assets_tests.harness import START, day_keys

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DAYS = day_keys(30)
CHUNKS = [(DAYS[0], DAYS[9]), (DAYS[10], DAYS[19]), (DAYS[20], DAYS[29])]
CRASH_AT = "lake.before_write/orders:2"  # the second chunk, before its write


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 days of sample landing files, shared (read only) by the module's tests."""
    path = tmp_path_factory.mktemp("landing")
    generate(path, START, len(DAYS), seed=7)
    return path


@pytest.fixture(scope="module")
def single_run(landing: Path, tmp_path_factory: pytest.TempPathFactory) -> Fingerprint:
    """Fingerprint of the 30 days loaded as one run (one range) into a lake of its own."""
    root = tmp_path_factory.mktemp("single_run")
    job = location_definitions(landing, root).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        tags={RANGE_START_TAG: DAYS[0], RANGE_END_TAG: DAYS[-1]},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    table = orders_table(root)
    assert table.version() == 0  # one commit for the whole range
    return fingerprint(read_rows(table))


def orders_table(root: Path) -> Any:
    """The Delta table ``orders`` of the lake under ``root`` (it must exist)."""
    table = LakeTable(str(root / "lake" / "orders")).open()
    assert table is not None, "orders was never written"
    return table


def chunk_outcomes(instance: dg.DagsterInstance, backfill_id: str) -> dict[tuple, dict]:
    """(first day, last day) -> the write's metadata, for each run of a backfill.

    A run of a range reports one materialization per day, all from its one write.
    """
    outcomes = {}
    for run in backfill_runs(instance, backfill_id):
        assert run.status == dg.DagsterRunStatus.SUCCESS, run.run_id
        assert PARTITION_TAG not in run.tags  # a range, not a single partition
        metadata = run_metadata(instance, run.run_id)
        assert len(metadata) == 10  # one per day of the chunk
        writes = {(m["committed"], m["delta_version"], m.get("no_op_proof")) for m in metadata}
        assert len(writes) == 1, writes
        outcomes[(run.tags[RANGE_START_TAG], run.tags[RANGE_END_TAG])] = metadata[0]
    return outcomes


def test_a_30_day_backfill_is_3_runs_of_10_days_equal_to_one_run(
    landing: Path, single_run: Fingerprint, tmp_path: Path
):
    location = write_location(landing, tmp_path / "root")
    instance = new_instance(tmp_path / "home")
    apply_writers(instance, declared_writers(location_definitions(landing, tmp_path / "root")))

    outcomes = chunk_outcomes(instance, run_backfill(instance, location, DAYS))

    assert list(outcomes) == CHUNKS
    assert all(md["committed"] is True for md in outcomes.values())
    assert sorted(md["delta_version"] for md in outcomes.values()) == [0, 1, 2]
    table = orders_table(tmp_path / "root")
    assert table.version() == 2  # one commit per chunk
    assert fingerprint(read_rows(table)) == single_run


def _killed_backfill(home: Path, location: Path) -> subprocess.CompletedProcess[str]:
    """The backfill in a child process armed to SIGKILL itself before chunk 2's write."""
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "IDEM_CRASH_AT": CRASH_AT,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "idem_assets_tests.deploy.backfill_child"]
    return subprocess.run(
        [*command, str(home), str(location), DAYS[0], DAYS[-1]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_killed_backfill_relaunched_redoes_only_the_chunks_that_did_not_commit(
    landing: Path, single_run: Fingerprint, tmp_path: Path
):
    root = tmp_path / "root"
    location = write_location(landing, root)

    child = _killed_backfill(tmp_path / "killed_home", location)
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert f"idem-crash-point {CRASH_AT}" in child.stderr
    table = orders_table(root)
    assert table.version() == 0  # exactly one chunk committed
    days = read_rows(table).column("order_date").to_pylist()
    survivor = (min(days).isoformat(), max(days).isoformat())
    assert survivor in CHUNKS

    # The daemon is back with a fresh instance: the proofs are in the checkpoint store
    # and the Delta table.
    instance = new_instance(tmp_path / "home")
    relaunched = chunk_outcomes(instance, run_backfill(instance, location, DAYS))

    assert list(relaunched) == CHUNKS
    assert relaunched[survivor]["committed"] is False
    assert relaunched[survivor]["no_op_proof"] == "inputs"  # nothing recomputed
    assert relaunched[survivor]["delta_version"] == 0
    redone = [md for chunk, md in relaunched.items() if chunk != survivor]
    assert [md["committed"] for md in redone] == [True, True]
    assert sorted(md["delta_version"] for md in redone) == [1, 2]
    assert orders_table(root).version() == 2
    assert fingerprint(read_rows(orders_table(root))) == single_run

    again = chunk_outcomes(instance, run_backfill(instance, location, DAYS))
    assert [md["committed"] for md in again.values()] == [False, False, False]
    assert {md["no_op_proof"] for md in again.values()} == {"inputs"}
    assert orders_table(root).version() == 2  # the version did not move


def test_pools_apply_sets_the_declared_writers_of_the_table(landing: Path, tmp_path: Path):
    limits = declared_writers(location_definitions(landing, tmp_path / "root"))
    assert limits == {"lake/orders": 2}
    instance = new_instance(tmp_path / "home")
    apply_writers(instance, limits)
    assert instance.event_log_storage.get_concurrency_info("lake/orders").slot_count == 2
