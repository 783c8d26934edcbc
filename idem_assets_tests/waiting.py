"""Waiting on events (a file, a port, a count, a process's exit) without betting on time.

A test waits for the event itself, polling it; the deadline is only there to end a wait
that can no longer succeed, so it is minutes, far past what a loaded CI machine (two cores,
load 4-8) needs. When it does run out, the failure names what was awaited and what was
seen last (a count, the tail of a log), so that nobody has to rerun the test to find out.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

WAIT_SECONDS = 300.0
POLL_SECONDS = 0.05


def tail(text: str | bytes | None, chars: int = 3000) -> str:
    """The end of some process output, decoded; "(nothing)" when there is none."""
    if not text:
        return "(nothing)"
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text[-chars:]


def wait_until(
    done: Callable[[], T | None],
    what: str,
    *,
    seen: Callable[[], object] | None = None,
    process: subprocess.Popen | None = None,
    output: Callable[[], object] | None = None,
    seconds: float = WAIT_SECONDS,
    every: float = POLL_SECONDS,
) -> T:
    """Poll ``done`` until it returns something truthy, and return that.

    Given the ``process`` that brings the event about, the wait fails as soon as that
    process has exited without it (showing ``output()``). ``done`` may also raise to stop
    the wait. After ``seconds`` the wait fails naming ``what`` and, given ``seen``, what
    ``seen()`` shows then.
    """
    deadline = time.monotonic() + seconds
    while True:
        result = done()
        if result:
            return result
        if process is not None and process.poll() is not None:
            shown = f"\n{output()}" if output is not None else ""
            raise AssertionError(
                f"the process waited on (pid {process.pid}) exited with {process.returncode} "
                f"before {what}{shown}"
            )
        if time.monotonic() >= deadline:
            shown = f"\nlast seen: {seen()}" if seen is not None else ""
            raise AssertionError(f"gave up after {seconds:.0f} s waiting for {what}{shown}")
        time.sleep(every)


def wait_for_exit(
    process: subprocess.Popen,
    what: str,
    *,
    seen: Callable[[], object] | None = None,
    seconds: float = WAIT_SECONDS,
) -> int:
    """The exit code of ``process`` once it exits; fails after ``seconds`` naming ``what``
    (and, given ``seen``, what ``seen()`` shows then), leaving the process to the caller."""
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        shown = f"\nlast seen: {seen()}" if seen is not None else ""
        raise AssertionError(
            f"gave up after {seconds:.0f} s waiting for {what} (pid {process.pid}){shown}"
        ) from None


def alive(process: subprocess.Popen, what: str, output: Callable[[], object] | None = None) -> bool:
    """True while ``process`` runs; an ``AssertionError`` naming ``what`` once it has exited.

    For a ``done`` that waits on several processes (``wait_until``'s ``process`` is one):
    ``all(alive(child, "a child") for child in children) and all(f.exists() for f in ready)``.
    """
    code = process.poll()
    if code is None:
        return True
    shown = f":\n{output()}" if output is not None else ""
    raise AssertionError(f"{what} exited with {code} before the awaited event{shown}")


def output_at_exit(
    process: subprocess.Popen, what: str, *, seconds: float = WAIT_SECONDS
) -> tuple[Any, Any]:
    """``process.communicate()``: its (stdout, stderr) once it exits. After ``seconds`` it is
    killed and the wait fails naming ``what``, with the end of what it printed."""
    try:
        return process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(
            f"gave up after {seconds:.0f} s waiting for {what} (pid {process.pid}) to exit; "
            f"its stdout:\n{tail(out)}\nits stderr:\n{tail(err)}"
        ) from None
