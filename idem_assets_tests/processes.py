"""Child processes of the tests: this checkout's Python, and writers released together."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from idem_assets_tests.waiting import WAIT_SECONDS

CHECKOUT = Path(__file__).resolve().parents[1]


def checkout_env(**extra: str) -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH (and ``extra`` variables)."""
    path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def run_python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python *args`` in a fresh interpreter importing this checkout; never raises on exit."""
    return subprocess.run(
        [sys.executable, *args],
        env=checkout_env(),
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def race(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``fn(*job, barrier)`` for each job, each in a fresh spawned process, released together.

    The pool is closed and joined, not terminated: its workers leave on their own. A
    terminate sends SIGTERM, and a worker inherits SIGTERM ignored when the test process
    ignores it (seen under CI runners): ``Pool.__exit__`` then waits for it forever.
    """
    ctx = mp.get_context("spawn")  # children inherit the environment, nothing else
    with ctx.Manager() as manager:
        # A job whose process never gets there breaks the barrier for the others
        # (BrokenBarrierError) instead of holding them forever.
        barrier = manager.Barrier(len(jobs), timeout=WAIT_SECONDS)
        pool = ctx.Pool(len(jobs))
        try:
            return pool.starmap(fn, [(*job, barrier) for job in jobs])
        finally:
            pool.close()
            pool.join()
