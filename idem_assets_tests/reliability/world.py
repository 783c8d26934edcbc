"""Shared parts of the reliability suites: child runs, lake comparison and the report rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from idem_assets.checkpoint import Status, Tracker, open_store
from idem_assets.faults import CRASH_ENV, CRASH_MARKER
from idem_assets.lake import fingerprint, read_rows
from idem_assets.notify import NOTIFY_TOKEN_ENV
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.harness import Project
from idem_assets_tests.reliability.report import REPORT_DIR, RESULTS_ENV

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# `make reliability` names the file; otherwise each pytest process writes its own, so that
# sessions running side by side never mix or truncate each other's rows.
_SESSION_FILE = f"results-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.jsonl"
# A child's runs take seconds to tens of seconds on a quiet machine; minutes on a loaded one.
CHILD_TIMEOUT = 480.0

NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "orders": ("order_id",),
    "customers": ("customer_id",),
    "events": ("event_id",),
    "daily_sales": ("order_date",),
    "product_catalog": ("product_id",),
    "quarantine": ("source", "partition_date", "source_file", "row_number"),
}
LAKE_TABLES = ("orders", "customers", "events", "daily_sales", "quarantine")


def project_at(root: Path, landing: Path, state_url: str | None = None) -> Project:
    """A lake and checkpoint store under ``root`` reading an existing landing zone."""
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(root / "lake"))
    url = state_url or f"sqlite:///{root / 'state' / 'checkpoint.db'}"
    return Project(
        root=root,
        lake=lake,
        checkpoint=CheckpointResource(url=url),
        instance=dg.DagsterInstance.ephemeral(),
    )


@dataclass
class ChildOutcome:
    """How a child run process ended and what it reported."""

    returncode: int
    stderr: str
    runs: list[dict[str, Any]]

    @property
    def killed(self) -> bool:
        """Whether the process died of SIGKILL."""
        return self.returncode == -signal.SIGKILL

    def crash_points(self) -> list[str]:
        """The crash points the child announced just before killing itself."""
        return [
            line.split()[1] for line in self.stderr.splitlines() if line.startswith(CRASH_MARKER)
        ]

    def tail(self) -> str:
        """The end of the child's stderr, for assertion messages."""
        return self.stderr[-3000:]


@dataclass
class Child:
    """A running child process of ``idem_assets_tests.reliability.runner``."""

    process: subprocess.Popen[bytes]
    result: Path
    stderr: Path
    run_ids: list[str] = field(default_factory=list)

    def stderr_tail(self) -> str:
        """The end of what the child has written to stderr so far."""
        return self.stderr.read_text(errors="replace")[-3000:]

    def wait(self, timeout: float = CHILD_TIMEOUT) -> ChildOutcome:
        """Wait for the process and read its report (empty when it was killed)."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"child {self.process.pid} still running after {timeout} s: " + self.stderr_tail()
            ) from None
        runs = json.loads(self.result.read_text())["runs"] if self.result.exists() else []
        return ChildOutcome(code, self.stderr.read_text(errors="replace"), runs)


def spawn_runs(
    project: Project,
    work: Path,
    job: str,
    runs: Sequence[str | list[str]],
    *,
    crash_at: str | None = None,
    token: str = "unused-token",
    env: Mapping[str, str] | None = None,
    **spec: Any,
) -> Child:
    """Start a child process that runs ``job`` for each entry of ``runs`` on ``project``
    (``env``: more environment variables, e.g. fault injection for its Spark executors)."""
    work.mkdir(parents=True, exist_ok=True)
    name = uuid.uuid4().hex[:8]
    run_ids = [str(uuid.uuid4()) for _ in runs]
    full = {
        "landing": project.lake.landing_uri,
        "lake": project.lake.lake_root,
        "state_url": project.checkpoint.resolved_url,
        "job": job,
        "runs": list(runs),
        "run_ids": run_ids,
        "result": str(work / f"{name}.json"),
        **spec,
    }
    child_env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), NOTIFY_TOKEN_ENV: token}
    child_env.pop(CRASH_ENV, None)
    if crash_at is not None:
        child_env[CRASH_ENV] = crash_at
    child_env.update(env or {})
    stderr = work / f"{name}.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "idem_assets_tests.reliability.runner", json.dumps(full)],
            cwd=PROJECT_ROOT,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    return Child(process, work / f"{name}.json", stderr, run_ids)


def run_child(
    project: Project, work: Path, job: str, runs: Sequence[str | list[str]], **kwargs: Any
) -> ChildOutcome:
    """Run a child to its end."""
    return spawn_runs(project, work, job, runs, **kwargs).wait()


def keys_of(rows: list[dict[str, Any]], table: str) -> list[tuple[Any, ...]]:
    """The natural key of every row of a table, duplicates kept."""
    key = NATURAL_KEYS[table]
    return [tuple(row[c] for c in key) for row in rows]


@dataclass(frozen=True)
class Comparison:
    """A lake against a clean reference lake, table by table."""

    equal: bool
    duplicates: int
    lost: int
    extra: int
    differing: tuple[str, ...]

    def row(self) -> dict[str, Any]:
        """The report columns this comparison fills."""
        return {
            "final_state_equal": self.equal,
            "duplicates": self.duplicates,
            "lost_rows": self.lost,
            "extra_rows": self.extra,
            "differing_tables": list(self.differing),
        }


def compare_lakes(
    lake: LakeResource, clean: LakeResource, tables: Iterable[str] = LAKE_TABLES
) -> Comparison:
    """Fingerprints, duplicate keys, lost and extra keys of every table against ``clean``."""
    duplicates = lost = extra = 0
    differing = []
    for table in tables:
        got_table, want_table = lake.table(table).open(), clean.table(table).open()
        got = None if got_table is None else read_rows(got_table)
        want = None if want_table is None else read_rows(want_table)
        got_keys = [] if got is None else keys_of(got.to_pylist(), table)
        want_keys = [] if want is None else keys_of(want.to_pylist(), table)
        duplicates += len(got_keys) - len(set(got_keys))
        lost += len(set(want_keys) - set(got_keys))
        extra += len(set(got_keys) - set(want_keys))
        if got is None or want is None:
            same = got is want
        else:
            same = fingerprint(got) == fingerprint(want)
        if not same:
            differing.append(table)
    return Comparison(not differing and duplicates == 0, duplicates, lost, extra, tuple(differing))


def trackers(url: str, scope: str) -> list[Tracker]:
    """Every tracker of a checkpoint scope."""
    with open_store(url) as store:
        return store.list(scope)


def unsettled_lake_records(url: str) -> list[Tracker]:
    """Lake write records still in progress (a crashed run's, until reconciled)."""
    with open_store(url) as store:
        return [t for t in store.list(statuses=[Status.IN_PROGRESS]) if t.scope.startswith("lake/")]


def results_file() -> Path:
    """Where this session's report rows go."""
    return Path(os.environ.get(RESULTS_ENV) or REPORT_DIR / _SESSION_FILE)


def record_row(
    suite: str,
    scenario: str,
    *,
    runs: int,
    faults: str,
    equal: bool,
    duplicates: int,
    lost: int,
    **details: Any,
) -> None:
    """Append one scenario row to this session's reliability report file."""
    results = results_file()
    results.parent.mkdir(parents=True, exist_ok=True)
    row = {
        "suite": suite,
        "scenario": scenario,
        "runs": runs,
        "faults": faults,
        "final_state_equal": equal,
        "duplicates": duplicates,
        "lost_rows": lost,
        **details,
        "recorded_at": time.time(),
    }
    with results.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row, default=str) + "\n")
