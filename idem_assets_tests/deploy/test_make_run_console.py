"""What `make run`'s console says for a fixed set of actions: what happened, a line each.

`make run` is started as a user starts it (sample data laid out, free ports, tmp dirs). The
actions: the UI comes up; one run of the daily job for the last sample day is launched
through the webserver's GraphQL (as the launch dialog does); the automation sensor follows
it (notifications for that day); the console is then left alone until the sensor has ticked
with nothing to do and the daemon has passed its minutely workspace refresh (where Dagster's
own daemon used to leave a code server to time out with a WARNING); then one Ctrl-C.

The console must hold: make's few lines, the UI's address, a line per write, per failed
check and per run, the stop line, and nothing else: no DEBUG event, no WARNING or traceback
the actions did not cause, no daemon pass summaries, no `Aborted!`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from idem_assets_tests.deploy.test_make_run_stops import (
    DOWN_SECONDS,
    UP_SECONDS,
    _graphql,
    start_make_run,
)
from idem_assets_tests.deploy.test_run_retries import _LAUNCH

pytestmark = pytest.mark.slow

# The daemon refreshes its workspace every 60 s; an abandoned code server said so 20 s later.
WATCH_SECONDS = 90.0
RUNS_SECONDS = 600.0
# make's lines, the notification service's and the UI's, the stop line, and per run: its
# writes, its end and its failed checks (the sample data breaks two value rules on some days).
MOST_LINES = 25

_STATE = """
{
  runsOrError { ... on Runs { results { runId jobName status endTime } } }
  sensorOrError(sensorSelector: {repositoryLocationName: "idem_assets",
      repositoryName: "__repository__", sensorName: "lake_automation"}) {
    ... on Sensor { sensorState { ticks(limit: 1) { timestamp status } } }
  }
}
"""
_TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}


def _post(port: int, query: str, variables: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["data"]


def _log(path: Path) -> str:
    return path.read_text(errors="replace")


def _wait(what: str, done, deadline_seconds: float, log: Path, make: subprocess.Popen) -> None:
    deadline = time.monotonic() + deadline_seconds
    while not done():
        assert make.poll() is None, f"make exited while waiting for {what}:\n{_log(log)[-4000:]}"
        assert time.monotonic() < deadline, (
            f"waited {deadline_seconds:.0f} s for {what}:\n" + (_log(log)[-4000:])
        )
        time.sleep(1)


def _settled(port: int) -> bool:
    """Every run ended and the automation sensor ticked after the last one with nothing to do."""
    state = _graphql(port, _STATE)
    runs = state["runsOrError"]["results"]
    ticks = state["sensorOrError"]["sensorState"]["ticks"]
    if not runs or any(run["status"] not in _TERMINAL for run in runs) or not ticks:
        return False
    last_end = max(run["endTime"] or 0 for run in runs)
    return ticks[0]["timestamp"] > last_end and ticks[0]["status"] == "SKIPPED"


def test_make_run_prints_what_happened_and_nothing_else(tmp_path):
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        make, port = start_make_run(tmp_path, out, "SAMPLE_DATA=yes", "TPCH_DAYS=2")
    try:
        _wait("the UI", lambda: "Dagster UI on" in _log(log), UP_SECONDS, log, make)
        up = time.monotonic()
        day = re.search(r"sample days laid out: \S+\.\.\.(\S+) ", _log(log))
        assert day is not None, _log(log)
        request = {
            "selector": {
                "repositoryLocationName": "idem_assets",
                "repositoryName": "__repository__",
                "jobName": "daily_lake_job",
            },
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": day[1]}]},
        }
        result = _post(port, _LAUNCH, {"params": request})["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        run_id = result["run"]["runId"]
        _wait("the runs to end", lambda: _settled(port), RUNS_SECONDS, log, make)
        remaining = WATCH_SECONDS - (time.monotonic() - up)
        if remaining > 0:
            time.sleep(remaining)
        runs = _graphql(port, _STATE)["runsOrError"]["results"]
        os.killpg(make.pid, signal.SIGINT)
        make.wait(timeout=DOWN_SECONDS)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()

    console = _log(log)
    lines = console.splitlines()
    # make ends itself with the SIGINT it was stopped by, as after a Ctrl-C in a terminal.
    assert make.returncode in (0, -signal.SIGINT), console
    assert {run["status"] for run in runs} == {"SUCCESS"}, runs
    assert f"daily_lake_job - {run_id} - run succeeded in " in console, console
    # A line per write of the run: the four daily tables, each committed once.
    writes = [line for line in lines if run_id in line and "committed version" in line]
    assert len(writes) == 4, console
    # And a line for every other run (the automation's), and nothing of Dagster's DEBUG.
    for run in runs:
        assert f"{run['runId']} - run succeeded in " in console, (run, console)
    assert " - DEBUG - " not in console
    for noise in ("Traceback", "Aborted!", "No heartbeat", "dagster.daemon", "Warning:"):
        assert noise not in console, (noise, console)
    unexplained = [
        line
        for line in lines
        if (" - WARNING - " in line or " - ERROR - " in line) and " - check " not in line
    ]
    assert not unexplained, console
    assert len(lines) <= MOST_LINES, f"{len(lines)} lines:\n{console}"
    assert lines[-1] == "stopping the webserver, the daemon and what they started", console
