"""`dagster/max_retries`: a run whose step is killed after its commit retries and converges.

`dagster dev` (webserver + daemon, the embedded profile with run retries on) runs the daily
job for one day with a process per step; the orders step is SIGKILLed right after its Delta
commit, before the checkpoint is settled (``idem_assets.faults``, once). The daemon retries
the run from the failure; the lake then equals a clean load of the same landing day.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from idem_assets.resources import LakeResource
from idem_assets_tests.harness import START, new_project
from idem_assets_tests.reliability.world import LAKE_TABLES, compare_lakes
from idem_assets_tests.ui.server import start_dagster_dev

# `dagster dev` up (up to 300 s) and the runs (up to RUNS_SECONDS) fit in the test's time.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

DAY = START.isoformat()
RUNS_SECONDS = 600
_LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
_RUNS = """
query { runsOrError { ... on Runs { results {
  runId status tags { key value } } } } }
"""


def _runs(server) -> list[dict]:
    return server.graphql(_RUNS)["runsOrError"]["results"]


def test_a_killed_step_retried_by_the_daemon_converges_to_the_clean_lake(tmp_path: Path):
    marker = tmp_path / "crashed-once"
    server = start_dagster_dev(
        tmp_path / "dev",
        days=1,
        extra_env={"IDEM_CRASH_AT": "lake.after_commit/orders", "IDEM_CRASH_ONCE": str(marker)},
    )
    try:
        launched = server.graphql(
            _LAUNCH,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": "idem_assets",
                        "repositoryName": "__repository__",
                        "jobName": "daily_lake_job",
                    },
                    "runConfigData": {"execution": {"config": {"multiprocess": {}}}},
                    "executionMetadata": {
                        "tags": [
                            {"key": "dagster/partition", "value": DAY},
                            {"key": "dagster/max_retries", "value": "2"},
                        ]
                    },
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        first = launched["run"]["runId"]
        deadline = time.monotonic() + RUNS_SECONDS
        while time.monotonic() < deadline:
            runs = _runs(server)
            if (
                any(r["status"] == "SUCCESS" for r in runs)
                or sum(r["status"] == "FAILURE" for r in runs) > 2
            ):
                break
            time.sleep(2)
        else:
            raise AssertionError(f"no run finished: {runs}\n{server.log_tail()}")
    finally:
        server.stop()

    assert marker.exists()  # the orders step did die after its commit
    by_id = {r["runId"]: r for r in runs}
    assert by_id[first]["status"] == "FAILURE"
    retries = [r for r in runs if r["runId"] != first]
    assert [r["status"] for r in retries] == ["SUCCESS"], runs
    tags = {t["key"]: t["value"] for t in retries[0]["tags"]}
    assert tags["dagster/parent_run_id"] == first
    assert tags["dagster/retry_number"] == "1"

    # The lake is what one clean load of the day gives: same rows, no duplicate, none lost.
    lake = LakeResource(landing_dir=str(server.root / "landing"), lake_dir=str(server.lake_dir))
    clean = new_project(tmp_path / "clean", days=1)
    assert clean.run_days(DAY).success
    comparison = compare_lakes(lake, clean.lake, LAKE_TABLES)
    assert comparison.equal, comparison
    # The killed attempt's commit is the only one for orders: the retry proved it and wrote
    # nothing again.
    orders = lake.table("orders").open()
    assert orders is not None and orders.version() == 0
