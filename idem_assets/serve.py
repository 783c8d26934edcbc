"""The UI as ``make run`` serves it: webserver, daemon and notification service, stopped as one.

``python -m idem_assets.serve --port 3000 --notify-port 8765`` starts Dagster's webserver
and daemon on the workspace (and, with ``--notify-port``, the reference notification
service), each in a process group of its own, and waits. One Ctrl-C or SIGTERM stops all of
them and everything they started (code servers, run workers): an interrupt to each group,
then, after a grace period, SIGKILL to whatever is left. A service that exits on its own
stops the others, and the exit code says which.

Two waits of Dagster's own decide how soon a run launched from the UI starts: the run
queue's pass (``dequeue_interval_seconds`` in the instance profile, one second here) and
the backfill daemon's pass, a fixed 30 s in Dagster that no setting changes. The daemon
started here (``python -m idem_assets.serve daemon``) passes over backfills every
``--backfill-interval`` seconds (default 1) instead; a deployment's own ``dagster-daemon
run`` keeps Dagster's 30 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

GRACE_SECONDS = 15.0
POLL_SECONDS = 0.5
BACKFILL_INTERVAL_SECONDS = 1


@dataclass
class Service:
    """One started service: its name and its process (the leader of its own group)."""

    name: str
    process: subprocess.Popen[bytes]

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the service and everything it started."""
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass


class Stop(Exception):
    """SIGINT or SIGTERM arrived."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _start(name: str, command: Sequence[str]) -> Service:
    # A group of its own: the terminal's Ctrl-C reaches this process alone, which then stops
    # every group in order, and a group outlives none of its members' children.
    return Service(name, subprocess.Popen(list(command), start_new_session=True))


def stop_all(services: Sequence[Service], grace: float = GRACE_SECONDS) -> None:
    """Interrupt every group, wait up to ``grace`` seconds, SIGKILL whatever is left."""
    for service in services:
        service.signal_group(signal.SIGINT)
    deadline = time.monotonic() + grace
    for service in services:
        try:
            service.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while its children (code servers, run workers) hold the group.
    for service in services:
        service.signal_group(signal.SIGKILL)
        service.process.wait()


def _wait_for_ui(url: str, services: Sequence[Service], timeout: float = 300.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(service.process.poll() is not None for service in services):
            return False
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2):
                return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(POLL_SECONDS)
    return False


def commands(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(name, command) of each service to start."""
    python = sys.executable
    workspace = ["-w", args.workspace]
    started = [
        (
            "webserver",
            [python, "-m", "dagster_webserver", "-h", args.host, "-p", str(args.port), *workspace],
        ),
        (
            "daemon",
            [
                python,
                "-m",
                "idem_assets.serve",
                "daemon",
                "--backfill-interval",
                str(args.backfill_interval),
                *workspace,
            ],
        ),
    ]
    if args.notify_port:
        started.append(
            (
                "notification service",
                [
                    python,
                    "-m",
                    "idem_assets.notify",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(args.notify_port),
                    "--db",
                    args.notify_db,
                ],
            )
        )
    return started


def prepare_instance() -> None:
    """Open the instance once, so that its storage exists before the webserver and the daemon
    open it at the same moment (two first openings of a SQLite instance race to create it)."""
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        instance.get_runs(limit=1)
        instance.schedule_storage  # noqa: B018  (created on first use)


def serve(args: argparse.Namespace) -> int:
    """Start every service, wait for a signal or an exit, stop them all."""
    prepare_instance()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    services: list[Service] = []
    try:
        for name, command in commands(args):
            services.append(_start(name, command))
        url = f"http://{args.host}:{args.port}"
        if _wait_for_ui(url, services):
            print(f"Dagster UI on {url} (Ctrl-C stops it and everything it started)", flush=True)
        while True:
            for service in services:
                code = service.process.poll()
                if code is not None:
                    print(f"{service.name} exited with {code}; stopping the others", flush=True)
                    return code or 1
            time.sleep(POLL_SECONDS)
    except Stop:
        print("stopping the webserver, the daemon and what they started", flush=True)
        return 0
    finally:
        # A second Ctrl-C during the shutdown must not leave a group behind.
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        stop_all(services)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_daemon(backfill_interval: int, daemon_args: Sequence[str]) -> None:
    """``dagster-daemon run`` whose backfill daemon passes every ``backfill_interval`` s."""
    from dagster._daemon import controller
    from dagster._daemon.cli import main

    # The backfill loop reads this module constant at the start of each pass's wait; it is
    # not part of the instance configuration. Absent in another Dagster, the default stays.
    if hasattr(controller, "DEFAULT_DAEMON_INTERVAL_SECONDS"):
        controller.DEFAULT_DAEMON_INTERVAL_SECONDS = backfill_interval
    sys.argv = ["dagster-daemon", "run", *daemon_args]
    main()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``serve`` (the default) or ``daemon``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["daemon"]:
        parser = argparse.ArgumentParser(prog="python -m idem_assets.serve daemon")
        parser.add_argument("--backfill-interval", type=int, default=BACKFILL_INTERVAL_SECONDS)
        known, rest = parser.parse_known_args(argv[1:])
        run_daemon(known.backfill_interval, rest)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--workspace", default="workspace.yaml")
    parser.add_argument(
        "--notify-port", type=int, default=None, help="also serve the notification service"
    )
    parser.add_argument("--notify-db", default=str(Path("data") / "state" / "notify.db"))
    parser.add_argument(
        "--backfill-interval",
        type=int,
        default=BACKFILL_INTERVAL_SECONDS,
        help="seconds between the backfill daemon's passes (Dagster's own: 30)",
    )
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
