"""The UI as ``make run`` serves it: webserver, daemon and notification service, stopped as one.

``python -m idem_assets.serve --port 3000 --notify-port 8765`` starts a code server for each
code location of the workspace, then Dagster's webserver and daemon on a workspace of those
servers (and, with ``--notify-port``, the reference notification service), each in a process
group of its own, and waits. One Ctrl-C or SIGTERM stops all of them and everything they
started (run workers): an interrupt to each group, then, after a grace period, SIGKILL to
whatever is left. A service that exits on its own stops the others, and the exit code says
which.

One code server, started here, serves both the webserver and the daemon (as ``dagster dev``
does): the code location loads once, and the daemon's minutely workspace refresh reconnects
to it instead of starting a new server and leaving the old one to time out (Dagster's own
``dagster-daemon run -w workspace.yaml`` does that, with a ``No heartbeat received`` WARNING
a minute). The UI's "Reload" reloads the server's code.

The services log WARNING and up: what a person reads is each run's lines (a line per write,
per failed check and per run, ``idem_assets/lib/console.py``) and this module's. With
``IDEM_LOG_LEVEL=DEBUG`` the services log at Dagster's usual INFO and runs print their DEBUG
events.

Two waits of Dagster's own decide how soon a run launched from the UI starts: the run
queue's pass (``dequeue_interval_seconds`` in the instance profile, one second here) and
the backfill daemon's pass, a fixed 30 s in Dagster that no setting changes. The daemon
started here (``python -m idem_assets.serve daemon``) passes over backfills every
``--backfill-interval`` seconds (default 1) instead; a deployment's own ``dagster-daemon
run`` keeps Dagster's 30 s.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

GRACE_SECONDS = 15.0
POLL_SECONDS = 0.5
BACKFILL_INTERVAL_SECONDS = 1
# Loading the code location takes seconds; a loaded machine can make it minutes.
CODE_LOAD_SECONDS = 600.0
UI_SECONDS = 300.0


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


class Stop(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, like KeyboardInterrupt, so that no library's
    ``except Exception`` on the way can swallow it)."""


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


def _wait_for(ready: Callable[[], bool], services: Sequence[Service], timeout: float) -> bool:
    """Poll ``ready`` until it holds; False once a service has exited or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(service.process.poll() is not None for service in services):
            return False
        if ready():
            return True
        time.sleep(POLL_SECONDS)
    return False


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def services_log_level() -> str:
    """The services' level: WARNING unless ``IDEM_LOG_LEVEL`` asks for more (or less)."""
    from idem_assets.lib.console import LEVELS, log_level

    level = log_level()
    return "info" if level == "DEBUG" else max(level, "WARNING", key=LEVELS.index).lower()


@dataclass(frozen=True)
class CodeServer:
    """A code location of the workspace served by ``dagster code-server start`` on a socket."""

    location: str
    target: list[str]  # -m MODULE / -f FILE [-a ATTRIBUTE] [-d WORKING_DIRECTORY]
    socket: Path

    def command(self, level: str) -> list[str]:
        """The server's command line."""
        return [
            sys.executable,
            *("-m", "dagster", "code-server", "start", "--socket", str(self.socket)),
            *("--location-name", self.location, "--log-level", level, *self.target),
        ]

    def entry(self) -> dict[str, object]:
        """Its entry in a workspace file."""
        return {"grpc_server": {"socket": str(self.socket), "location_name": self.location}}

    def ready(self) -> bool:
        """Whether the server accepts connections (it listens once its code has loaded)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.socket))
            except OSError:
                return False
        return True


def code_servers(workspace: Path, folder: Path) -> list[CodeServer]:
    """A code server for each ``python_module`` / ``python_file`` location of ``workspace``."""
    import yaml

    loaded = yaml.safe_load(workspace.read_text()) or {}
    servers = []
    for number, entry in enumerate(loaded.get("load_from", [])):
        ((kind, spec),) = entry.items()
        spec = {"module_name": spec} if kind == "python_module" and isinstance(spec, str) else spec
        spec = {"relative_path": spec} if kind == "python_file" and isinstance(spec, str) else spec
        if kind == "python_module":
            target = ["-m", spec["module_name"]]
        elif kind == "python_file":
            target = ["-f", str(workspace.parent / spec["relative_path"])]
        else:
            raise ValueError(f"{workspace}: serve starts python_module and python_file locations")
        if spec.get("attribute"):
            target += ["-a", spec["attribute"]]
        directory = spec.get("working_directory")
        target += ["-d", str(workspace.parent / directory) if directory else os.getcwd()]
        location = spec.get("location_name") or target[1]
        servers.append(CodeServer(location, target, folder / f"code-{number}.sock"))
    return servers


def commands(args: argparse.Namespace, workspace: Path, level: str) -> list[tuple[str, list[str]]]:
    """(name, command) of each service to start after the code servers."""
    python = sys.executable
    started = [
        (
            "webserver",
            [
                *(python, "-m", "idem_assets.serve", "webserver"),
                *("-h", args.host, "-p", str(args.port)),
                *("-w", str(workspace), "--dagster-log-level", level),
            ],
        ),
        (
            "daemon",
            [
                *(python, "-m", "idem_assets.serve", "daemon"),
                *("--backfill-interval", str(args.backfill_interval)),
                *("-w", str(workspace), "--log-level", level),
            ],
        ),
    ]
    if args.notify_port:
        started.append(
            (
                "notification service",
                [
                    *(python, "-m", "idem_assets.notify", "serve", "--host", "127.0.0.1"),
                    *("--port", str(args.notify_port), "--db", args.notify_db),
                    *("--log-level", "INFO" if level == "info" else "WARNING"),
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
    level = services_log_level()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    services: list[Service] = []
    folder = Path(tempfile.mkdtemp(prefix="idem-serve-"))
    try:
        servers = code_servers(Path(args.workspace).resolve(), folder)
        for server in servers:
            services.append(_start(f"code server {server.location}", server.command(level)))
        if not _wait_for(
            lambda: all(server.ready() for server in servers), services, CODE_LOAD_SECONDS
        ):
            print("the code servers did not start; stopping", flush=True)
            return 1
        workspace = folder / "workspace.yaml"
        workspace.write_text(json.dumps({"load_from": [server.entry() for server in servers]}))
        for name, command in commands(args, workspace, level):
            services.append(_start(name, command))
        url = f"http://{args.host}:{args.port}"
        if _wait_for(lambda: _answers(f"{url}/server_info"), services, UI_SECONDS):
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
        shutil.rmtree(folder, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_quietly(command: click.Command, args: Sequence[str], **extra: object) -> int:
    """Run one of Dagster's click commands; the interrupt that stops it ends it with 0.

    Run standalone, click answers an interrupt with ``Aborted!`` and 1, and uvicorn raises
    the webserver's SIGINT again once it has shut down gracefully, so every stop would end
    with that line.
    """
    try:
        command.main(list(args), standalone_mode=False, **extra)
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        pass
    return 0


def run_webserver(webserver_args: Sequence[str]) -> int:
    """``dagster-webserver``, stopped quietly."""
    from idem_assets._extras import require_extra

    require_extra("dagster_webserver", "ui")
    from dagster_webserver.cli import cli

    return run_quietly(cli, webserver_args, auto_envvar_prefix="DAGSTER_WEBSERVER")


def run_daemon(backfill_interval: int, daemon_args: Sequence[str]) -> int:
    """``dagster-daemon run`` whose backfill daemon passes every ``backfill_interval`` s."""
    from dagster._daemon import controller
    from dagster._daemon.cli import cli

    # The backfill loop reads this module constant at the start of each pass's wait; it is
    # not part of the instance configuration. Absent in another Dagster, the default stays.
    if hasattr(controller, "DEFAULT_DAEMON_INTERVAL_SECONDS"):
        controller.DEFAULT_DAEMON_INTERVAL_SECONDS = backfill_interval
    # On a new instance the run-retry daemon starts from the newest event, as it should, and
    # says so as a WARNING per event type; nothing is wrong, so nothing is said.
    logging.getLogger("dagster.daemon.EventLogConsumerDaemon").addFilter(
        lambda record: not record.getMessage().startswith("No cursor for event type")
    )
    return run_quietly(cli, ["run", *daemon_args], obj={})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``serve`` (the default), or one of its services: ``daemon``, ``webserver``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["daemon"]:
        parser = argparse.ArgumentParser(prog="python -m idem_assets.serve daemon")
        parser.add_argument("--backfill-interval", type=int, default=BACKFILL_INTERVAL_SECONDS)
        known, rest = parser.parse_known_args(argv[1:])
        return run_daemon(known.backfill_interval, rest)
    if argv[:1] == ["webserver"]:
        return run_webserver(argv[1:])
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
