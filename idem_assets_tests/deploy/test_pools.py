"""Writers of one table queue: each lake asset is in its own pool, limited to one step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.lake import LakeTable
from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START, day_keys
from idem_assets_tests.waiting import output_at_exit, tail, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")
BLOCKED = "Step blocked by limit for pool lake/orders"


def _messages(instance: dg.DagsterInstance) -> list[str]:
    return [
        entry.user_message for run in instance.get_runs() for entry in instance.all_logs(run.run_id)
    ]


def test_a_run_waits_while_another_writer_of_its_table_holds_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # the make run instance
    shutil.copy(ROOT / "deploy" / "sqlite" / "dagster.yaml", home / "dagster.yaml")
    generate(tmp_path / "landing", START, 1, seed=7)
    instance = dg.DagsterInstance.from_config(str(home))
    assert instance.event_log_storage.get_pool_config().default_pool_limit == 1
    # Another writer of orders is running: it holds the pool's one slot.
    instance.event_log_storage.set_concurrency_slots("lake/orders", 1)
    held = instance.event_log_storage.claim_concurrency_slot("lake/orders", "other-run", "orders")
    assert held.is_claimed

    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "NO_COLOR": "1",
        "IDEM_LANDING_DIR": str(tmp_path / "landing"),
        "IDEM_LAKE_DIR": str(tmp_path / "lake"),
        "IDEM_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}",
        "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.Popen(
        [str(DG), "launch", "--assets", "orders", "--partition", day_keys(1)[0]],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            lambda: BLOCKED in _messages(instance),
            f"the run's {BLOCKED!r} message while the pool is held",
            seen=lambda: _messages(instance)[-5:],
            process=run,
            output=lambda: tail(run.stdout.read()),
            every=0.5,
        )
        # A window for a run that wrongly took the slot to go on; load only shortens what
        # it gets done in it, so this can miss a bug but never fail a correct run.
        time.sleep(2)
        assert run.poll() is None  # still queued on the slot
        assert LakeTable(str(tmp_path / "lake" / "orders")).open() is None  # nothing written
    finally:
        instance.event_log_storage.free_concurrency_slots_for_run("other-run")
    output, _ = output_at_exit(run, "the run once the slot was freed")
    assert run.returncode == 0, output[-3000:]
    table = LakeTable(str(tmp_path / "lake" / "orders")).open()
    assert table is not None and table.version() == 0
