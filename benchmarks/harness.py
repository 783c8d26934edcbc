"""Side-by-side measurement: contenders run alternately, each in a fresh child process.

Every sample runs in its own spawned process, so its peak RSS is its own; the
timer covers only the measured call (inputs are loaded before it starts). Samples
of one case alternate between contenders (A B C A B C …), so drift on a shared
machine hits all of them alike; reports give the median and the min–max spread.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Prepare = Callable[..., Any]
Measured = Callable[[Any], dict[str, Any] | None]
Verify = Callable[[Any, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Contender:
    """A named way of doing the case's work: ``prepare`` (untimed) then ``run`` (timed).

    ``verify`` (untimed, after the run) reads back what the run did — table versions,
    files touched — so that checking the outcome is not billed to the contender.
    """

    name: str
    prepare: Prepare
    run: Measured
    args: tuple[Any, ...] = ()
    verify: Verify | None = None


@dataclass
class Stats:
    """Samples of one contender in one case."""

    name: str
    seconds: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median wall time in seconds."""
        return statistics.median(self.seconds)

    @property
    def spread(self) -> tuple[float, float]:
        """(min, max) wall time in seconds."""
        return min(self.seconds), max(self.seconds)

    @property
    def rss(self) -> float:
        """Median peak RSS in MiB."""
        return statistics.median(self.peak_rss_mb)

    def last(self, key: str, default: Any = None) -> Any:
        """A value the contender reported on its last sample."""
        return self.extra[-1].get(key, default) if self.extra else default


def _child(contender: Contender, queue: mp.Queue) -> None:
    state = contender.prepare(*contender.args)
    started = time.perf_counter()
    extra = contender.run(state) or {}
    seconds = time.perf_counter() - started
    if contender.verify is not None:
        extra = {**extra, **contender.verify(state, extra)}
    # ru_maxrss is in KiB on Linux: the peak of this process only.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((seconds, peak, extra))


def sample(
    contender: Contender, timeout: float = 3600, method: str = "spawn"
) -> tuple[float, float, dict[str, Any]]:
    """Run a contender once in a fresh process: (seconds, peak RSS MiB, reported extras).

    A spawned child starts with its parent's peak RSS (Linux keeps the high-water mark of
    the forked copy across exec), so it reports at least the parent's peak; ``method``
    "forkserver" forks children from a small server process instead, so a child's peak
    is its own even when the parent has grown (generated data, earlier families).
    """
    ctx = mp.get_context(method)
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(contender, queue))
    proc.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return queue.get(timeout=1)
            except queue_module.Empty:
                if not proc.is_alive():
                    raise RuntimeError(
                        f"{contender.name} died with exit code {proc.exitcode}"
                    ) from None
                if time.monotonic() > deadline:
                    proc.kill()
                    raise TimeoutError(f"{contender.name} took over {timeout} s") from None
    finally:
        proc.join(timeout=60)


def compare(
    contenders: Sequence[Contender], repetitions: int, method: str = "spawn"
) -> list[Stats]:
    """Run contenders alternately ``repetitions`` times; stats in contender order."""
    stats = [Stats(c.name) for c in contenders]
    for _ in range(repetitions):
        for contender, stat in zip(contenders, stats, strict=True):
            seconds, peak, extra = sample(contender, method=method)
            stat.seconds.append(seconds)
            stat.peak_rss_mb.append(peak)
            stat.extra.append(extra)
    return stats


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if i else "---" for i in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def timing_rows(stats: Sequence[Stats], baseline: str | None = None) -> list[list[Any]]:
    """Rows of name, median s, spread, ratio to the baseline, peak RSS."""
    base = next((s.median for s in stats if s.name == baseline), None)
    rows = []
    for s in stats:
        low, high = s.spread
        ratio = f"{s.median / base:.2f}×" if base else "—"
        rows.append([s.name, s.median, f"{low:.3f}–{high:.3f}", ratio, s.rss])
    return rows


TIMING_HEADERS = ["contender", "median s", "min–max s", "× baseline", "peak RSS MiB"]
