"""Kill a child between delta-rs writing a commit's data files and writing its log entry.

``write_deltalake`` and ``merge().execute()`` write the new Parquet files and then the
``_delta_log`` entry inside one Rust call, so no crash point can sit between the two.
The parent watches the table directory instead and SIGKILLs the child as soon as a new
Parquet file shows up. The kill counts as a hit only if, once the child is dead, the
table holds new data files and no new log version: exactly "data files written, commit
not written". Otherwise (the commit won the race) the caller tries again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_POLL_SECONDS = 0.0005


def data_files(table_dir: Path) -> set[str]:
    """Relative paths of the Parquet files under a (date-partitioned) table directory."""
    found: set[str] = set()
    pending = [table_dir]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.is_dir() and entry.name != "_delta_log":
                pending.append(Path(entry.path))
            elif entry.name.endswith(".parquet"):
                found.add(os.path.relpath(entry.path, table_dir))
    return found


def log_version(table_dir: Path) -> int:
    """The newest committed version in ``_delta_log`` (-1 when the table does not exist)."""
    try:
        names = os.listdir(table_dir / "_delta_log")
    except FileNotFoundError:
        return -1
    versions = [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]
    return max(versions, default=-1)


@dataclass(frozen=True)
class UncommittedKill:
    """Where the watcher caught the child."""

    hit: bool
    new_files: int
    version_before: int
    version_after: int


def kill_between_files_and_commit(
    process: subprocess.Popen[bytes], table_dir: Path, timeout: float = 180.0
) -> UncommittedKill:
    """SIGKILL ``process`` once new data files exist in ``table_dir``; report what it left."""
    before_files, before_version = data_files(table_dir), log_version(table_dir)
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if data_files(table_dir) - before_files:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(_POLL_SECONDS)
    if process.poll() is None:
        process.kill()
    process.wait()
    # Judged on what the dead process left behind: signals are delivered asynchronously,
    # so only the state after its death tells whether the commit made it.
    new, version = len(data_files(table_dir) - before_files), log_version(table_dir)
    return UncommittedKill(
        process.returncode == -signal.SIGKILL and new > 0 and version == before_version,
        new,
        before_version,
        version,
    )
