"""Writers in separate processes, released together."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any


def race(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``fn(*job, barrier)`` for each job, each in a fresh spawned process, released together.

    The pool is closed and joined, not terminated: its workers leave on their own. A
    terminate sends SIGTERM, and a worker inherits SIGTERM ignored when the test process
    ignores it (seen under CI runners): ``Pool.__exit__`` then waits for it forever.
    """
    ctx = mp.get_context("spawn")  # children inherit the environment, nothing else
    with ctx.Manager() as manager:
        barrier = manager.Barrier(len(jobs))
        pool = ctx.Pool(len(jobs))
        try:
            return pool.starmap(fn, [(*job, barrier) for job in jobs])
        finally:
            pool.close()
            pool.join()
