"""The service as its own process: SIGKILL mid-delivery, restart on the same file, takeover."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from idem_assets.notify import DeliveryError, NotificationClient, idempotency_key
from idem_assets_tests.notify.raw_http import get_json
from idem_assets_tests.waiting import WAIT_SECONDS, tail, wait_for_exit

ServeProcess = tuple[subprocess.Popen[str], str, Path]
StartProcess = Callable[..., ServeProcess]


@pytest.fixture
def serve(tmp_path: Path, token: str) -> Iterator[StartProcess]:
    """Start ``python -m idem_assets.notify serve`` processes; killed at teardown."""
    processes: list[subprocess.Popen[str]] = []
    logs: list[IO[str]] = []

    def start(*flags: str, db: Path = tmp_path / "notify.sqlite3") -> ServeProcess:
        log_path = tmp_path / f"serve-{len(processes)}.log"
        logs.append(log_path.open("w"))
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "idem_assets.notify",
                "serve",
                "--port",
                "0",
                "--db",
                str(db),
                *flags,
            ],
            stdout=subprocess.PIPE,
            stderr=logs[-1],
            text=True,
            env={**os.environ, "IDEM_NOTIFY_TOKEN": token},
        )
        processes.append(process)
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], WAIT_SECONDS)
        line = process.stdout.readline() if ready else ""
        assert line.startswith("serving http://127.0.0.1:"), (
            f"waited {WAIT_SECONDS:.0f} s for the 'serving' line, read {line!r}; "
            f"exit code {process.poll()}, log:\n{tail(log_path.read_text())}"
        )
        return process, line.split()[1], log_path

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
        wait_for_exit(process, "a killed serve process to be reaped")
        if process.stdout is not None:
            process.stdout.close()
    for log in logs:
        log.close()


def test_marker_survives_sigkill_and_is_taken_over_after_restart(
    serve: StartProcess, token: str
) -> None:
    key = idempotency_key("test.orders.shipped", 1)
    first, url, first_log = serve(
        "--hang-rate", "1", "--hang-seconds", "60", "--in-flight-timeout", "2"
    )
    claimed = time.monotonic()
    with pytest.raises(DeliveryError) as caught:
        NotificationClient(url, token, timeout_seconds=0.5, max_retries=0).send(key, {"id": 1})
    assert caught.value.retryable and "TimeoutError" in str(caught.value)
    first.send_signal(signal.SIGKILL)
    wait_for_exit(first, "the SIGKILLed serve process to be reaped")

    second, url, second_log = serve("--in-flight-timeout", "2")
    stats = get_json(url, token, "/v1/stats")
    assert (stats["in_flight"], stats["deliveries"], stats["hangs"]) == (1, 0, 1)
    # No hang on this server: the timeout only has to outlast a slow answer under load.
    client = NotificationClient(
        url, token, timeout_seconds=60, max_retries=30, backoff_seconds=0.1, max_backoff_seconds=0.3
    )
    result = client.send(key, {"id": 1})
    assert result.status == "delivered"
    assert time.monotonic() - claimed >= 2
    assert client.delivery_counts() == {key: 1}
    assert client.stats()["takeovers"] == 1

    second.send_signal(signal.SIGTERM)
    stopped = wait_for_exit(
        second, "serve to stop on SIGTERM", seen=lambda: tail(second_log.read_text())
    )
    assert stopped == 0
    logs = first_log.read_text() + second_log.read_text()
    assert f"POST /v1/notifications 201 key={key}" in logs
    assert token not in logs


def test_serve_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "IDEM_NOTIFY_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "idem_assets.notify", "serve", "--db", str(tmp_path / "n.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_SECONDS,
    )
    assert done.returncode == 2
    assert "IDEM_NOTIFY_TOKEN" in done.stderr


def test_serve_refuses_invalid_fault_flags(tmp_path: Path, token: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "idem_assets.notify",
            "serve",
            "--db",
            str(tmp_path / "n.db"),
            "--error-rate",
            "2",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "IDEM_NOTIFY_TOKEN": token},
        timeout=WAIT_SECONDS,
    )
    assert done.returncode == 2
    assert "error_rate must be between 0 and 1" in done.stderr
