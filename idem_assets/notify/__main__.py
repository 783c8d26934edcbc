"""Command line: ``python -m idem_assets.notify serve --port 8765 --db notify.sqlite3``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from idem_assets.notify import NOTIFY_TOKEN_ENV
from idem_assets.notify.faults import Faults
from idem_assets.notify.service import DEFAULT_IN_FLIGHT_TIMEOUT_SECONDS, NotificationServer


def build_parser() -> argparse.ArgumentParser:
    """The ``serve`` command and its flags."""
    parser = argparse.ArgumentParser(prog="python -m idem_assets.notify")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the notification service in the foreground",
        description=f"The bearer token is read from ${NOTIFY_TOKEN_ENV}, never from the command "
        "line, where other users of the machine could read it.",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    serve.add_argument("--db", required=True, help="SQLite file holding keys and deliveries")
    serve.add_argument(
        "--in-flight-timeout",
        type=float,
        default=DEFAULT_IN_FLIGHT_TIMEOUT_SECONDS,
        help="seconds after which an in-flight key counts as abandoned and may be taken over",
    )
    defaults = Faults()
    serve.add_argument("--error-rate", type=float, default=defaults.error_rate)
    serve.add_argument(
        "--error-after-delivery-rate", type=float, default=defaults.error_after_delivery_rate
    )
    serve.add_argument("--latency-ms", type=float, default=defaults.latency_ms)
    serve.add_argument("--latency-jitter-ms", type=float, default=defaults.latency_jitter_ms)
    serve.add_argument("--hang-rate", type=float, default=defaults.hang_rate)
    serve.add_argument("--hang-seconds", type=float, default=defaults.hang_seconds)
    serve.add_argument("--seed", type=int, default=defaults.seed)
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    return parser


def serve(args: argparse.Namespace) -> int:
    """Run until SIGTERM or SIGINT; prints ``serving <url>`` on stdout once listening."""
    # A standalone, Dagster-free server: it reads its token here (see idem_assets.resources).
    token = os.environ.get(NOTIFY_TOKEN_ENV, "")
    if not token:
        print(
            f"error: set ${NOTIFY_TOKEN_ENV} to the bearer token clients must send", file=sys.stderr
        )
        return 2
    try:
        faults = Faults(
            error_rate=args.error_rate,
            error_after_delivery_rate=args.error_after_delivery_rate,
            latency_ms=args.latency_ms,
            latency_jitter_ms=args.latency_jitter_ms,
            hang_rate=args.hang_rate,
            hang_seconds=args.hang_seconds,
            seed=args.seed,
        )
        server = NotificationServer(
            args.db,
            token,
            host=args.host,
            port=args.port,
            faults=faults,
            in_flight_timeout_seconds=args.in_flight_timeout,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    # Parent processes (tests, scripts) read this line to learn the port chosen for --port 0.
    print(f"serving {server.url}", flush=True)
    stop.wait()
    server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m idem_assets.notify``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
