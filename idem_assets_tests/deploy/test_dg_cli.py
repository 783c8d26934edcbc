"""The Dagster CLI people now use, on this project: dg check/list defs, dg launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from idem_assets.lake import LakeTable, read_rows
from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START, day_keys
from idem_assets_tests.ui.server import start_dagster_dev

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")
KEYS = day_keys(3)


def _dg(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
        "IDEM_LANDING_DIR": str(tmp_path / "landing"),
        "IDEM_LAKE_DIR": str(tmp_path / "lake"),
        "IDEM_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}",
        "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [str(DG), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_dg_checks_and_lists_the_definitions(tmp_path: Path):
    done = _dg(tmp_path, "check", "defs")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    done = _dg(tmp_path, "list", "defs", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    listed = json.loads(done.stdout)
    assets = {a["asset_key"] for a in listed["assets"]}
    assert {
        "orders",
        "customers",
        "events",
        "daily_sales",
        "product_catalog",
        "notifications",
        "tpch_orders",
    } <= assets
    checks = {c["key"] for c in listed["asset_checks"]}
    assert {"orders:rerun_equality", "daily_sales:reconciles_with_orders"} <= checks


def test_dg_launch_materializes_a_partition_and_a_range_with_checks_per_day(tmp_path: Path):
    generate(tmp_path / "landing", START, 3, seed=7)
    done = _dg(tmp_path, "launch", "--assets", "orders", "--partition", KEYS[0])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = LakeTable(str(tmp_path / "lake" / "orders"))
    assert table.open() is not None and table.open().version() == 0
    done = _dg(
        tmp_path,
        "launch",
        "--assets",
        "orders,daily_sales",
        "--partition-range",
        f"{KEYS[0]}...{KEYS[-1]}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stored = read_rows(table.open())
    assert sorted({d.isoformat() for d in stored.column("order_date").to_pylist()}) == KEYS
    assert read_rows(LakeTable(str(tmp_path / "lake" / "daily_sales")).open()).num_rows == 3
    # The runs went into the instance of DAGSTER_HOME, with one check result per day.
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    records = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("orders"), "rerun_equality"), limit=20
    )
    by_partition: dict[str | None, list] = {}
    for record in records:
        by_partition.setdefault(record.partition, []).append(record.status)
    assert sorted(by_partition) == KEYS
    assert by_partition[KEYS[0]] == [AssetCheckExecutionRecordStatus.SUCCEEDED] * 2
    statuses = {s for values in by_partition.values() for s in values}
    assert statuses == {AssetCheckExecutionRecordStatus.SUCCEEDED}


def test_make_run_turns_the_automation_sensor_on(tmp_path: Path):
    makefile = (ROOT / "Makefile").read_text()
    assert "dagster sensor start lake_automation -w workspace.yaml" in makefile
    dagster = Path(sys.executable).with_name("dagster")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    (tmp_path / "home").mkdir()
    done = subprocess.run(
        [str(dagster), "sensor", "start", "lake_automation", "-w", "workspace.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    states = {s.instigator_name: s.status.value for s in instance.all_instigator_state()}
    assert states["lake_automation"] == "RUNNING"


_ASSETS = "query { assetNodes { assetKey { path } } }"


def test_dg_dev_serves_the_project_ui(tmp_path: Path):
    """`dg dev` (found from pyproject.toml, no workspace file) loads the code location."""
    server = start_dagster_dev(tmp_path, days=1, launcher="dg")
    try:
        nodes = server.graphql(_ASSETS)["assetNodes"]
        with urllib.request.urlopen(f"{server.url}/server_info", timeout=120) as response:
            assert response.status == 200
    finally:
        server.stop()
    assets = {"/".join(node["assetKey"]["path"]) for node in nodes}
    assert {
        "orders",
        "customers",
        "events",
        "daily_sales",
        "notifications",
        "tpch_lineitem",
    } <= assets
