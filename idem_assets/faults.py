"""Fault injection for the reliability suite: SIGKILL this process, fail, or stall at a
named point.

Production code calls ``crash_point("name")`` at the places where a crash is most
dangerous (between a side effect and its bookkeeping). It does nothing unless the
environment variable ``IDEM_CRASH_AT`` names that point when the call runs:

- ``IDEM_CRASH_AT=lake.after_commit/orders`` kills at the first hit of that point;
- ``IDEM_CRASH_AT=outbox.sent_unsettled:3`` kills at its third hit in this process.

With ``IDEM_CRASH_ONCE=<path>`` as well, the point fires in one process only: the first to
reach it creates ``<path>`` (exclusively) and dies; every later process, such as the run a
retry launches with the same environment, finds the file and goes on.

Two milder faults use the same point names and hit counts: ``IDEM_FAIL_AT=<point>[:n]``
raises ``InjectedFailure`` there (a task that fails once, for ``IDEM_FAIL_ONCE=<path>``,
and is retried), and ``IDEM_DELAY_AT=<point>:<milliseconds>`` sleeps there at every hit
(so that a test can kill a process while it is busy).

The kill is a real ``SIGKILL``: no ``finally``, no ``atexit``, no flush, exactly like
the OOM killer or a pulled plug. Just before it, one line naming the point is written
(unbuffered) to stderr so the parent process can prove where the child died. The
variable is read at call time, never at import, so a parent sets it per child process.
(``idem_assets.resources`` lists where each of the project's variables is read.)
"""

from __future__ import annotations

import os
import signal
import time

CRASH_ENV = "IDEM_CRASH_AT"
CRASH_ONCE_ENV = "IDEM_CRASH_ONCE"
FAIL_ENV = "IDEM_FAIL_AT"
FAIL_ONCE_ENV = "IDEM_FAIL_ONCE"
DELAY_ENV = "IDEM_DELAY_AT"
CRASH_MARKER = "idem-crash-point"

# Hits per (variable, point), counted only for points the environment names.
_hits: dict[tuple[str, str], int] = {}


class InjectedFailure(RuntimeError):
    """The failure ``IDEM_FAIL_AT`` asked for."""


def crash_target(env: str = CRASH_ENV) -> tuple[str, int] | None:
    """The (point, nth hit) a variable asks for, or None when that injection is off."""
    value = os.environ.get(env)
    if not value:
        return None
    name, sep, nth = value.rpartition(":")
    if not sep or not nth.isdigit():
        return value, 1
    if int(nth) < 1:
        raise ValueError(f"{env}={value!r}: the hit number must be 1 or more")
    return name, int(nth)


def _hit(env: str, name: str) -> bool:
    """Count a hit of ``name`` for ``env``; True when this is the hit it asks for."""
    target = crash_target(env)
    if target is None or target[0] != name:
        return False
    _hits[(env, name)] = _hits.get((env, name), 0) + 1
    return _hits[(env, name)] == target[1]


def crash_point(name: str) -> None:
    """At a named point: SIGKILL (``IDEM_CRASH_AT``), raise (``IDEM_FAIL_AT``) or sleep
    (``IDEM_DELAY_AT``) if the environment asks for this point; else a no-op."""
    if DELAY_ENV in os.environ:
        point, _, millis = os.environ[DELAY_ENV].rpartition(":")
        if point == name and millis.isdigit():
            time.sleep(int(millis) / 1000)
    if FAIL_ENV in os.environ and _hit(FAIL_ENV, name) and _first_to_fire(FAIL_ONCE_ENV):
        os.write(2, f"{CRASH_MARKER} {name} failed pid={os.getpid()}\n".encode())
        raise InjectedFailure(f"injected failure at {name}")
    if CRASH_ENV not in os.environ:
        return
    if not _hit(CRASH_ENV, name) or not _first_to_fire(CRASH_ONCE_ENV):
        return
    os.write(2, f"{CRASH_MARKER} {name}:{_hits[(CRASH_ENV, name)]} pid={os.getpid()}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def _first_to_fire(env: str) -> bool:
    """True unless ``env`` names a file an earlier process already created."""
    marker = os.environ.get(env)
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True
