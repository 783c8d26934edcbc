"""One Ctrl-C (or a SIGTERM to make) stops everything `make run` started.

`make run` is started as a user starts it, on free ports and tmp dirs: the webserver, the
daemon, their code servers and the notification service come up; then the terminal's
Ctrl-C (SIGINT to make's process group) or a SIGTERM to make alone must leave none of the
processes it started alive.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

import pytest

from idem_assets_tests.ui.server import ROOT, dagster_dev_env, free_port

UP_SECONDS = 300.0
DOWN_SECONDS = 180.0
# make started as from a terminal: SIGINT and SIGTERM delivered and handled by default,
# whatever the test process left ignored or blocked (a child inherits both across exec, and
# a make started with SIGTERM ignored or blocked never passes it on).
_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM}); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGTERM, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def _signals(pid: int) -> str:
    """The signal masks of a process (blocked, ignored, caught), for a failure's message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "gone"
    return " ".join(line for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def _children() -> dict[int, int]:
    """pid -> parent pid of every process on the machine."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    parents = _children()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


_PARTITION_KEYS = (
    '{ assetNodeOrError(assetKey: {path: ["orders"]}) { ... on AssetNode { partitionKeys } } }'
)


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def start_make_run(root: Path, log: BinaryIO, *make_vars: str) -> tuple[subprocess.Popen, int]:
    """`make run` as a user starts it from a terminal, on free ports and dirs under ``root``.

    Returns make (leading its process group, as in a terminal) and the UI's port.
    """
    port, notify_port = free_port(), free_port()
    env = dagster_dev_env(root)
    (root / "landing").mkdir()
    env.update(
        {
            "PORT": str(port),
            "NOTIFY_PORT": str(notify_port),
            "NOTIFY_DB": str(root / "state" / "notify.db"),
            "IDEM_NOTIFY_URL": f"http://127.0.0.1:{notify_port}",
        }
    )
    make = subprocess.Popen(
        [
            *(sys.executable, "-c", _AS_FROM_A_TERMINAL),
            *("make", "--no-print-directory", "-o", ".venv/.installed", "run", *make_vars),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return make, port


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm-to-make"])
def test_one_signal_stops_everything_make_run_started(tmp_path, stop):
    log = (tmp_path / "make-run.log").open("wb")
    # The Ctrl-C case also lays out the sample data, as a first `make run` does.
    sample = ["SAMPLE_DATA=yes", "TPCH_DAYS=2"] if stop == "ctrl-c" else []
    make, port = start_make_run(tmp_path, log, *sample)
    started: set[int] = set()
    try:
        deadline = time.monotonic() + UP_SECONDS
        while not (
            _answers(f"http://127.0.0.1:{port}/server_info")
            and "serving http://127.0.0.1:" in (tmp_path / "make-run.log").read_text()
        ):
            assert make.poll() is None, (tmp_path / "make-run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "make-run.log").read_text()[-3000:]
            time.sleep(1)
        # The daemon's and the webserver's code servers are up once the UI lists the location.
        while len(descendants(make.pid)) < 5 and time.monotonic() < deadline:
            time.sleep(1)
        started = descendants(make.pid)
        names = {Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ") for pid in started}
        assert any(b"idem_assets.serve webserver" in n for n in names), names
        assert any(b"idem_assets.serve daemon" in n for n in names), names
        assert any(b"idem_assets.notify" in n for n in names), names

        if sample:
            # The shipped example's partitions are the sample's days, which make printed.
            output = (tmp_path / "make-run.log").read_text()
            days = re.search(r"sample days laid out: (\S+)\.\.\.(\S+) ", output)
            assert days is not None, output[-3000:]
            keys = _graphql(port, _PARTITION_KEYS)["assetNodeOrError"]["partitionKeys"]
            assert (keys[0], keys[-1], len(keys)) == (*days.groups(), 14)

        if stop == "ctrl-c":
            os.killpg(make.pid, signal.SIGINT)
        else:
            make.send_signal(signal.SIGTERM)
        signalled = {pid: _signals(pid) for pid in (make.pid, *started)}
        try:
            make.wait(timeout=DOWN_SECONDS)
        except subprocess.TimeoutExpired:
            output = (tmp_path / "make-run.log").read_text()[-3000:]
            raise AssertionError(
                f"make had not exited {DOWN_SECONDS:.0f} s after its {stop}; the supervisor "
                f"{'had' if 'stopping the webserver' in output else 'had not'} begun to stop; "
                f"signal masks when signalled: {signalled}; now: "
                f"{ {pid: _signals(pid) for pid in (make.pid, *started)} }\n{output}"
            ) from None
        deadline = time.monotonic() + DOWN_SECONDS
        while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = sorted(pid for pid in started if _alive(pid))
        assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left]
        assert not _answers(f"http://127.0.0.1:{port}/server_info")
        assert "stopping the webserver" in (tmp_path / "make-run.log").read_text()
    finally:
        for pid in [make.pid, *started]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        make.wait()
        log.close()
