"""`make demo`: each pass is one ranged daily run (a progress line per run as it finishes),
the table has a line per asset and run with its checks per day, and the second pass commits
nothing."""

import re

import pytest

from idem_assets import demo
from idem_assets.resources import LAKE_DIR_ENV, LANDING_DIR_ENV, STATE_URL_ENV, LakeResource
from idem_assets.sample.generator import generate
from idem_assets_tests.harness import DAILY_TABLES, START, day_keys

DAYS = 3
PROGRESS = re.compile(r"^pass ([12]) · (.+) · \d+\.\d s$")
TABLE_LINE = re.compile(
    r"^\s+([12])\s+(\S+)\s+(\S+)\s+\d+\s+\d+\s+\S+\s+(\d+)\s+(yes|no)\s+\S+\s+(\S+)\s*(.*)$"
)


@pytest.fixture
def lake(tmp_path, monkeypatch) -> LakeResource:
    """Three generated landing days (seed 7, no TPC-H), an empty lake, store and instance,
    as `make demo` finds them through its environment."""
    landing, lake_dir = tmp_path / "landing", tmp_path / "lake"
    generate(landing, START, DAYS, 7)
    (tmp_path / "state").mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.setenv(LANDING_DIR_ENV, str(landing))
    monkeypatch.setenv(LAKE_DIR_ENV, str(lake_dir))
    monkeypatch.setenv(STATE_URL_ENV, f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    return LakeResource(landing_dir=str(landing), lake_dir=str(lake_dir))


def test_demo_runs_each_pass_as_one_ranged_run_and_reproduces_it(lake, capsys):
    code = demo.main(["--days", str(DAYS)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(lines)

    keys = day_keys(DAYS)
    daily = f"daily_lake_job {keys[0]}..{keys[-1]} (one run, {DAYS} days)"
    progress = [m.groups() for m in map(PROGRESS.match, lines) if m]
    assert progress == [("1", daily), ("1", "catalog_job"), ("2", daily), ("2", "catalog_job")]
    # The progress lines come as the runs finish, before the table.
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("pass  asset"))
    assert max(i for i, line in enumerate(lines) if PROGRESS.match(line)) < header

    table = [m.groups() for m in map(TABLE_LINE.match, lines[header:]) if m]
    span = f"{keys[0]}..{keys[-1][5:]}"
    expected = {
        *((run, asset, span) for run in "12" for asset in DAILY_TABLES),
        *((run, "product_catalog", "-") for run in "12"),
    }
    assert sorted((run, asset, part) for run, asset, part, *_ in table) == sorted(expected)
    for run, asset, partition, _version, committed, _print, checks in table:
        assert committed == ("yes" if run == "1" else "no"), (run, asset, partition)
        assert "rerun_equality=ok" in checks and "FAIL" not in checks, (asset, partition)
    # The generator plants an unknown status on the first day and a negative amount on the
    # second: two days of three warn (value_rules holds both rules).
    orders = next(checks for r, a, *_, checks in table if r == "1" and a == "orders")
    assert f"value_rules=WARN 2/{DAYS} ({keys[0]}, {keys[1]})" in orders, orders
    prints = {run: {(a, p): fp for r, a, p, _v, _c, fp, _ in table if r == run} for run in "12"}
    assert prints["1"] == prints["2"]
    # One commit per table for the whole range, and none on the second pass.
    assert {version for _r, asset, _p, version, *_ in table if asset in DAILY_TABLES} == {"0"}
    assert {t: lake.table(t).open().version() for t in DAILY_TABLES} == dict.fromkeys(
        DAILY_TABLES, 0
    )
    assert any("second pass commits: 0;" in line for line in lines)
