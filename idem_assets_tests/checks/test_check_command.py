"""``idem-assets check``: a clean lake exits 0, a corrupted partition exits 1 and is named."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake

from idem_assets.lake import read_rows
from idem_assets.lake.predicates import conjunction, date_range
from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START, day_keys

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("idem-assets")  # installed with the package
KEYS = day_keys(3)
RANGE = f"{KEYS[0]}...{KEYS[-1]}"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update(
        IDEM_LANDING_DIR=str(tmp_path / "landing"),
        IDEM_LAKE_DIR=str(tmp_path / "lake"),
        IDEM_STATE_URL=f"sqlite:///{tmp_path / 'state.db'}",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    return env


def _check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed command, from the project root (where dg finds the location)."""
    return subprocess.run(
        [str(COMMAND), "check", *args],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Three landed days, materialized through the command's --materialize mode."""
    generate(tmp_path / "landing", START, 3, seed=7)
    done = _check(tmp_path, "--select", "key:orders", "--partition-range", RANGE, "--materialize")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert (tmp_path / "lake" / "orders" / "_delta_log").is_dir()
    return tmp_path


def _cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    suite = ET.parse(path).getroot()
    return {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}


def test_a_clean_lake_exits_0_with_a_row_per_partition_and_check(lake: Path):
    before = DeltaTable(str(lake / "lake" / "orders")).version()
    junit = lake / "checks.xml"
    done = _check(
        lake, "--select", "key:orders", "--partition-range", RANGE, "--junit-xml", str(junit)
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].split()[:5] == ["asset", "partition", "check", "passed", "severity"]
    rows = [line.split() for line in lines[2:] if line.startswith("orders ")]
    for key in KEYS:
        assert ["orders", key, "rerun_equality", "yes", "ERROR"] in [r[:5] for r in rows]
    assert "0 ERROR failed" in done.stdout
    cases = _cases(junit)
    assert {("orders", f"rerun_equality[{k}]") for k in KEYS} <= set(cases)
    assert not any(c.find("failure") is not None for c in cases.values())
    # Checking wrote nothing.
    assert DeltaTable(str(lake / "lake" / "orders")).version() == before


def test_a_corrupted_partition_exits_1_and_the_junit_file_names_it(lake: Path):
    table = DeltaTable(str(lake / "lake" / "orders"))
    middle = date_range(
        "order_date", dt.date.fromisoformat(KEYS[1]), dt.date.fromisoformat(KEYS[2])
    )
    rows = read_rows(table, ranges=[middle])
    amounts = rows.column("amount").to_pylist()
    amounts[0] += 1
    write_deltalake(
        table,
        rows.set_column(
            rows.schema.get_field_index("amount"),
            "amount",
            pa.array(amounts, rows.schema.field("amount").type),
        ),
        mode="overwrite",
        predicate=conjunction([middle]),
    )

    junit = lake / "checks.xml"
    done = _check(
        lake, "--select", "key:orders", "--partition-range", RANGE, "--junit-xml", str(junit)
    )
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert "1 ERROR failed" in done.stdout
    assert any(
        line.split()[:4] == ["orders", KEYS[1], "rerun_equality", "NO"]
        and "rows_differing=2" in line
        for line in done.stdout.splitlines()
    )
    cases = _cases(junit)
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {("orders", f"rerun_equality[{KEYS[1]}]")}
    failure = cases["orders", f"rerun_equality[{KEYS[1]}]"].find("failure")
    assert failure is not None and "rows_differing: 2" in (failure.text or "")


def test_usage_errors_exit_2_and_say_what_to_pass(tmp_path: Path):
    done = _check(tmp_path, "--select", "key:orders")
    assert done.returncode == 2
    assert "orders are partitioned: pass --partition KEY or --partition-range" in done.stderr
    done = _check(tmp_path, "--select", "key:no_such_asset", "--partition", KEYS[0])
    assert done.returncode == 2 and "matches no asset with checks" in done.stderr
    done = _check(tmp_path, "--select", "key:orders", "--partition-range", KEYS[0])
    assert done.returncode == 2 and "FIRST...LAST" in done.stderr


def test_the_documented_ci_workflow_runs_as_written(tmp_path: Path):
    workflow = yaml.safe_load((ROOT / "docs" / "ci" / "asset-checks.yml").read_text())
    runs = [step["run"] for step in workflow["jobs"]["asset-checks"]["steps"] if "run" in step]
    generate_landing = next(r for r in runs if "idem_assets.sample generate" in r)
    check = shlex.split(next(r for r in runs if r.startswith("idem-assets check")))
    assert check[:2] == ["idem-assets", "check"]
    env = _env(tmp_path)
    subprocess.run(
        generate_landing.replace("python ", f"{shlex.quote(sys.executable)} ", 1),
        shell=True,
        env=env,
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    junit = tmp_path / "asset-checks.xml"
    args = [str(junit) if a == "asset-checks.xml" else a for a in check[2:]]
    done = _check(tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    cases = _cases(junit)
    assets = {asset for asset, _ in cases}
    assert {"orders", "customers", "events", "daily_sales", "product_catalog"} <= assets
    assert ("product_catalog", "rerun_equality") in cases  # unpartitioned: one result
