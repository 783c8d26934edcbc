"""`make demo`: each pass is one ranged daily run (a progress line per run as it finishes),
the table has a line per asset and run with its checks per day, and the second pass commits
nothing. As `python -m idem_assets.demo` it says so from its first line: it prints before the
code location loads, then each asset write and finished step of a run as they happen."""

import os
import re
import shutil
from pathlib import Path

import pytest

from idem_assets import demo
from idem_assets.lib.console import LOG_LEVEL_ENV
from idem_assets.progress import PROGRESS_SECONDS_ENV
from idem_assets.resources import LAKE_DIR_ENV, LANDING_DIR_ENV, STATE_URL_ENV, LakeResource
from idem_assets.sample.generator import generate
from idem_assets_tests.harness import DAILY_TABLES, START, day_keys
from idem_assets_tests.processes import run_python
from idem_assets_tests.ui.server import ROOT

DAYS = 3
PROGRESS = re.compile(r"^pass ([12]) · (.+) · \d+\.\d s$")
TABLE_LINE = re.compile(
    r"^\s+([12])\s+(\S+)\s+(\S+)\s+\d+\s+\d+\s+\S+\s+(\d+)\s+(yes|no)\s+\S+\s+(\S+)\s*(.*)$"
)
LOADING = "demo: loading the code location…"
# A run's lines as it goes: `  pass N · job · asset written: …` and `  pass N · job · step S
# done`, each with the seconds since its step started.
WRITE_LINE = re.compile(r"^  pass ([12]) · (\S+) · (\S+) written: (.+) \(\d+\.\d s\)$")
STEP_LINE = re.compile(r"^  pass ([12]) · (\S+) · step (\S+) (done|FAILED) \(\d+\.\d s\)$")
STILL_LINE = re.compile(r"^(demo: |  pass [12] · (?:\S+ · )?)still (.+) · \d+\.\d s$")
# Dagster's own debug event of a step start, as its console logger prints it.
STEP_STARTED = 'Started execution of step "{}"'


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
    monkeypatch.delenv(LOG_LEVEL_ENV, raising=False)
    monkeypatch.delenv(PROGRESS_SECONDS_ENV, raising=False)
    return LakeResource(landing_dir=str(landing), lake_dir=str(lake_dir))


def assert_reproduced(lines: list[str], lake: LakeResource) -> None:
    """The demo's report: a line per run as it finished, then the table, whose second pass
    reproduced the first without a commit."""
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


def test_demo_runs_each_pass_as_one_ranged_run_and_reproduces_it(lake, capsys):
    code = demo.main(["--days", str(DAYS)])
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 0, "\n".join(lines)
    assert_reproduced(lines, lake)
    # Dagster's own step logs stay off the console unless IDEM_LOG_LEVEL asks for them.
    assert STEP_STARTED.format("orders") not in out + err


def test_the_command_prints_from_its_first_line_and_each_step_as_it_ends(lake, monkeypatch):
    # A tiny interval: a `still …` line for every phase that lasts longer than a look.
    monkeypatch.setenv(PROGRESS_SECONDS_ENV, "0.1")
    monkeypatch.setenv(LOG_LEVEL_ENV, "debug")
    # The instance profile `make demo` links into DAGSTER_HOME, whose handler prints DEBUG.
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(exist_ok=True)
    shutil.copy(ROOT / "deploy" / "sqlite" / "dagster.yaml", home / "dagster.yaml")
    done = run_python("-m", "idem_assets.demo", "--days", str(DAYS), timeout=600)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert_reproduced(lines, lake)

    # The first line comes before the code location loads, and says so while it loads.
    assert lines[0] == LOADING
    stills = [m.groups() for m in map(STILL_LINE.match, lines) if m]
    assert ("demo: ", "loading the code location") in stills

    # Each run names its asset writes and its steps as they end, before the run's own line:
    # pass 1 commits version 0 of each table, pass 2 proves it unchanged.
    runs = [i for i, line in enumerate(lines) if PROGRESS.match(line)]
    jobs = ["daily_lake_job", "catalog_job"] * 2
    for i, (begin, end, job) in enumerate(zip([0, *runs[:-1]], runs, jobs, strict=True)):
        run = "1" if i < 2 else "2"
        assets = DAILY_TABLES if job == "daily_lake_job" else ("product_catalog",)
        within = lines[begin + 1 : end]
        writes = [m.groups() for m in map(WRITE_LINE.match, within) if m]
        outcome = "committed version 0" if run == "1" else "unchanged, no commit"
        assert sorted(writes) == sorted((run, job, a, outcome) for a in assets), within
        steps = [m.groups() for m in map(STEP_LINE.match, within) if m]
        assert sorted(steps) == sorted((run, job, a, "done") for a in assets), within
        for asset in assets:  # an asset's write, then the end of its step
            wrote = next(k for k, line in enumerate(within) if f"· {asset} written" in line)
            ended = next(k for k, line in enumerate(within) if f"· step {asset} done" in line)
            assert wrote < ended, within
    # Everything a run printed came before the table.
    header = next(i for i, line in enumerate(lines) if line.startswith("pass  asset"))
    assert not any(WRITE_LINE.match(line) or STEP_LINE.match(line) for line in lines[header:])

    # IDEM_LOG_LEVEL=DEBUG prints Dagster's step events, on stderr.
    for asset in DAILY_TABLES:
        assert STEP_STARTED.format(asset) in done.stderr, asset
        assert STEP_STARTED.format(asset) not in done.stdout, asset


PROGRESS_PROGRAM = """
import os, sys, tempfile
from idem_assets.progress import Progress

with Progress(quiet_seconds=3600) as progress:
    print("before", flush=True)
    # What Dagster's compute log manager does while a step runs: descriptor 1 points at the
    # step's log file (and a process copies it to the terminal later).
    log = tempfile.TemporaryFile()  # gone when closed
    saved = os.dup(1)
    os.dup2(log.fileno(), 1)
    progress.say("during the step")
    os.dup2(saved, 1)
    print("after", flush=True)
    progress.say("the run's line")
log.seek(0)
print(log.read() == b"", flush=True)
log.close()
"""


def test_progress_lines_reach_the_terminal_in_order_while_a_step_captures_stdout():
    """A progress line printed while a step's compute log holds descriptor 1 comes out at
    once and in order, not later through the log's copy (the demo's run lines did)."""
    done = run_python("-c", PROGRESS_PROGRAM)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "before",
        "during the step",
        "after",
        "the run's line",
        "True",  # nothing of ours went into the step's log
    ]
