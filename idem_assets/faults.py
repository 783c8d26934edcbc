"""Crash injection for the reliability suite: SIGKILL this process at a named point.

Production code calls ``crash_point("name")`` at the places where a crash is most
dangerous (between a side effect and its bookkeeping). It does nothing unless the
environment variable ``IDEM_CRASH_AT`` names that point when the call runs:

- ``IDEM_CRASH_AT=lake.after_commit/orders`` kills at the first hit of that point;
- ``IDEM_CRASH_AT=outbox.sent_unsettled:3`` kills at its third hit in this process.

With ``IDEM_CRASH_ONCE=<path>`` as well, the point fires in one process only: the first to
reach it creates ``<path>`` (exclusively) and dies; every later process, such as the run a
retry launches with the same environment, finds the file and goes on.

The kill is a real ``SIGKILL``: no ``finally``, no ``atexit``, no flush, exactly like
the OOM killer or a pulled plug. Just before it, one line naming the point is written
(unbuffered) to stderr so the parent process can prove where the child died. The
variable is read at call time, never at import, so a parent sets it per child process.
(``idem_assets.resources`` lists where each of the project's variables is read.)
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "IDEM_CRASH_AT"
CRASH_ONCE_ENV = "IDEM_CRASH_ONCE"
CRASH_MARKER = "idem-crash-point"

# Hits per point, counted only for the point the environment names (one per process).
_hits: dict[str, int] = {}


def crash_target() -> tuple[str, int] | None:
    """The (point, nth hit) ``IDEM_CRASH_AT`` asks for, or None when crash injection is off."""
    value = os.environ.get(CRASH_ENV)
    if not value:
        return None
    name, sep, nth = value.rpartition(":")
    if not sep or not nth.isdigit():
        return value, 1
    if int(nth) < 1:
        raise ValueError(f"{CRASH_ENV}={value!r}: the hit number must be 1 or more")
    return name, int(nth)


def crash_point(name: str) -> None:
    """SIGKILL the current process here if ``IDEM_CRASH_AT`` names this point (else no-op)."""
    if CRASH_ENV not in os.environ:
        return
    target = crash_target()
    if target is None or target[0] != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] < target[1] or not _first_to_fire():
        return
    os.write(2, f"{CRASH_MARKER} {name}:{_hits[name]} pid={os.getpid()}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def _first_to_fire() -> bool:
    """True unless ``IDEM_CRASH_ONCE`` names a file an earlier process already created."""
    marker = os.environ.get(CRASH_ONCE_ENV)
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True
