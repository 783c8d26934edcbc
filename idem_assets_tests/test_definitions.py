"""The code location loads as `dagster dev` loads it, with everything in place."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from idem_assets.definitions import defs

ROOT = Path(__file__).resolve().parents[1]


def test_workspace_loads_through_the_dagster_cli(tmp_path):
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "IDEM_LANDING_DIR": str(tmp_path / "landing"),
        "IDEM_LAKE_DIR": str(tmp_path / "lake"),
    }
    profile = ROOT / "deploy" / "sqlite" / "dagster.yaml"
    (tmp_path / "dagster.yaml").write_text(profile.read_text())
    dagster = Path(sys.executable).with_name("dagster")
    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", str(ROOT / "workspace.yaml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr


def test_definitions_hold_every_asset_check_job_schedule_and_sensor():
    repo = defs.get_repository_def()
    assets = {key.to_user_string() for key in repo.asset_graph.get_all_asset_keys()}
    lake_assets = {"orders", "customers", "events", "product_catalog", "daily_sales"}
    assert assets >= lake_assets | {"notifications"}
    checks = {(k.asset_key.to_user_string(), k.name) for k in repo.asset_graph.asset_check_keys}
    assert ("notifications", "no_dead_letters") in checks
    for asset in lake_assets:
        assert (asset, "rerun_equality") in checks
        assert (asset, "unique_natural_key") in checks
    assert ("daily_sales", "reconciles_with_orders") in checks
    assert {j.name for j in repo.get_all_jobs()} >= {
        "daily_lake_job",
        "catalog_job",
        "notifications_job",
        "notifications_redrive_job",
        "lake_maintenance_job",
    }
    assert {s.name for s in repo.schedule_defs} == {
        "daily_lake_job_schedule",
        "lake_maintenance_schedule",
    }
    assert {s.name for s in repo.sensor_defs} >= {
        "orders_landing_sensor",
        "customers_landing_sensor",
        "events_landing_sensor",
        "product_catalog_landing_sensor",
        "notification_retry_sensor",
    }


def test_every_asset_is_described_and_lake_assets_declare_their_strategy():
    for spec in defs.resolve_all_asset_specs():
        assert spec.description and len(spec.description) > 80, spec.key
        assert spec.owners and spec.kinds, spec.key
        if spec.group_name == "lake":
            assert "idem/strategy" in spec.metadata, spec.key


def test_orders_checks_block_daily_sales():
    repo = defs.get_repository_def()
    orders_checks = [
        s for s in repo.asset_graph.asset_check_keys if s.asset_key == dg.AssetKey("orders")
    ]
    assert orders_checks
    # orders' value rules are WARN (they report, never block); every other check blocks.
    warn_rules = {"value_rules"}
    blocking = {key.name for key in orders_checks if repo.asset_graph.get_check_spec(key).blocking}
    assert blocking == {key.name for key in orders_checks} - warn_rules
    assert {"rerun_equality", "conservation", "quarantine_share"} <= blocking
