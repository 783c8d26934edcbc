"""`dagster dev` started the way `make run` starts it, on a free loopback port, in tmp dirs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START

ROOT = Path(__file__).resolve().parents[2]
# Minutes: `dagster dev` loading the code location on a loaded CI machine takes a while,
# and a Ctrl-C'd webserver and daemon take a while to wind down.
STARTUP_SECONDS = 300.0
STOP_SECONDS = 120.0
GRAPHQL_SECONDS = 120.0
_LOCATION_STATUS = """
query LocationStatus {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""
_CHECK_EVALUATIONS = """
query Checks($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on AssetCheckEvaluationEvent {
          evaluation { checkName success partition assetKey { path } }
        }
      }
    }
  }
}
"""


_RUN_TIMES = """
query RunTimes($runId: ID!) {
  runOrError(runId: $runId) { ... on Run { creationTime startTime endTime } }
}
"""


class DagsterDevError(RuntimeError):
    """`dagster dev` did not come up (the message carries the tail of its log)."""


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class DagsterDev:
    """A running `dagster dev` (webserver + daemon) over a generated landing zone."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        """Base URL of the UI."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def lake_dir(self) -> Path:
        """Where the Delta tables land."""
        return self.root / "lake"

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a GraphQL query (used to verify state, never to act for the user)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=GRAPHQL_SECONDS) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def check_evaluations(self, run_id: str) -> dict[tuple[str, str, str | None], bool]:
        """(asset, check, partition) -> passed, for a run, straight from the instance."""
        data = self.graphql(_CHECK_EVALUATIONS, {"runId": run_id})
        found = {}
        for event in data["logsForRun"]["events"]:
            if event["__typename"] == "AssetCheckEvaluationEvent":
                evaluation = event["evaluation"]
                key = (
                    "/".join(evaluation["assetKey"]["path"]),
                    evaluation["checkName"],
                    evaluation["partition"],
                )
                found[key] = evaluation["success"]
        return found

    def run_times(self, run_id: str) -> tuple[float, float, float]:
        """When the run was created, started and ended (epoch seconds), as the instance says."""
        run = self.graphql(_RUN_TIMES, {"runId": run_id})["runOrError"]
        return float(run["creationTime"]), float(run["startTime"]), float(run["endTime"])

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's combined output."""
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_until_loaded(self, timeout: float = STARTUP_SECONDS) -> None:
        """Block until the webserver answers and the code location has loaded."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise DagsterDevError(
                    f"dagster dev exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                entries = self.graphql(_LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
            except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
                last = str(error)
            else:
                loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
                errors = [
                    e for e in loaded if e["locationOrLoadError"]["__typename"] == "PythonError"
                ]
                if errors:
                    raise DagsterDevError(f"code location failed to load: {errors}")
                if entries and len(loaded) == len(entries):
                    return
                last = f"locations: {entries}"
            time.sleep(1.0)
        raise DagsterDevError(f"not ready after {timeout:.0f} s ({last}):\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the webserver, the daemon and their children: Ctrl-C to the group, then SIGKILL."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_SECONDS)
        # Children of a group leader that already exited still hold the group id.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def dagster_dev_env(root: Path, state_url: str | None = None) -> dict[str, str]:
    """The environment `make run` exports, pointed at ``root`` instead of ./data.

    Processes started with it import this checkout's package, whatever is installed.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("IDEM_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(
        {
            "DAGSTER_HOME": str(root / "dagster_home"),
            "IDEM_LANDING_DIR": str(root / "landing"),
            "IDEM_LAKE_DIR": str(root / "lake"),
            "IDEM_STATE_URL": state_url or f"sqlite:///{root / 'state' / 'checkpoint.db'}",
            # The daily assets never call the notification service; point it at a closed port.
            "IDEM_NOTIFY_URL": f"http://127.0.0.1:{free_port()}",
            "IDEM_NOTIFY_TOKEN": "ui-test-token",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def start_dagster_dev(
    root: Path,
    days: int = 4,
    log_path: Path | None = None,
    *,
    profile: Path = ROOT / "deploy" / "sqlite" / "dagster.yaml",
    state_url: str | None = None,
    launcher: str = "dagster",
    extra_env: dict[str, str] | None = None,
    workspace: Path = ROOT / "workspace.yaml",
) -> DagsterDev:
    """Generate landing data, copy the instance profile into DAGSTER_HOME, start `dagster dev`.

    Variables a profile reads (DAGSTER_PG_* for PostgreSQL) come from this environment.
    ``launcher="dg"`` starts ``dg dev`` instead, which finds the project from pyproject.toml;
    ``launcher="serve"`` starts what ``make run`` starts (``python -m idem_assets.serve``).
    ``days=0`` generates no sample data; ``workspace`` is what ``dagster`` and ``serve`` load.
    """
    if days:
        generate(root / "landing", START, days, seed=7)
    home = root / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    (root / "state").mkdir(exist_ok=True)
    shutil.copyfile(profile, home / "dagster.yaml")
    port = free_port()
    log_path = log_path or root / "dagster-dev.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    executable = str(Path(sys.executable).with_name(launcher))
    command = {
        "dagster": [executable, "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
        "dg": [executable, "dev", "--host", "127.0.0.1", "--port", str(port)],
        # What `make run` serves: webserver and daemon (backfills passed over every second).
        "serve": [
            *(sys.executable, "-m", "idem_assets.serve", "--port", str(port)),
            *("--workspace", str(workspace)),
        ],
    }[launcher]
    env = {**dagster_dev_env(root, state_url), **(extra_env or {})}
    # dg runs the project from its own virtualenv: the one these tests run in.
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parents[1])
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = DagsterDev(root=root, port=port, process=process, log_path=log_path)
    try:
        server.wait_until_loaded()
    except BaseException:
        server.stop()
        raise
    return server
