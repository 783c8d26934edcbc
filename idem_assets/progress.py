"""Lines that show a long command is alive: what it did, and what it is still doing.

A command prints what it did with :meth:`Progress.say`. Inside a :meth:`Progress.phase`, a
background thread asks the phase's :class:`Follower` for new lines a few times a second (a
run's finished steps, say) and, whenever nothing was printed for ``quiet_seconds``, prints
what the phase is still doing and for how long: ``IDEM_PROGRESS_SECONDS`` sets that interval
(4 s by default). :class:`RunSteps` follows a Dagster run that way. This module does not
import Dagster (:class:`RunSteps` does when used), so a command can print its first line
before it loads Dagster and its definitions.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    import dagster as dg

PROGRESS_SECONDS_ENV = "IDEM_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 4.0
# How long the thread waits between two looks at a phase: at most LOOK_SECONDS (half the
# interval when that is shorter), at least MIN_LOOK_SECONDS (a follower may read a database).
LOOK_SECONDS = 0.5
MIN_LOOK_SECONDS = 0.05


def progress_seconds() -> float:
    """The quiet interval ``IDEM_PROGRESS_SECONDS`` asks for (4 s when unset)."""
    text = os.environ.get(PROGRESS_SECONDS_ENV, "").strip()
    if not text:
        return DEFAULT_PROGRESS_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{PROGRESS_SECONDS_ENV}={text!r}: use a number of seconds above 0")
    return seconds


class Follower(Protocol):
    """What a phase follows: lines for what happened since the last look, and what is going
    on now."""

    def lines(self) -> list[str]:
        """Lines for what happened since the last call."""
        ...

    def doing(self) -> str:
        """What is going on now, as in ``still <doing>``."""
        ...


@dataclass(frozen=True)
class _Phase:
    prefix: str
    doing: str
    follower: Follower | None
    began: float


class Progress:
    """A command's progress lines on stdout, and ``still …`` lines while a phase is quiet.

    Used as a context manager: the thread that follows phases runs inside it.
    """

    def __init__(self, quiet_seconds: float = DEFAULT_PROGRESS_SECONDS) -> None:
        self.quiet_seconds = quiet_seconds
        # One lock for printing and for asking a follower: lines come out whole and in order.
        self._lock = threading.RLock()
        self._last_line = time.monotonic()
        self._phase: _Phase | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="progress", daemon=True)
        self._out: TextIO | None = None  # a copy of stdout while entered (``_own_stdout``)

    @classmethod
    def from_env(cls) -> Progress:
        """Progress with the interval ``IDEM_PROGRESS_SECONDS`` asks for."""
        return cls(progress_seconds())

    def __enter__(self) -> Progress:
        self._out = _own_stdout()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._thread.join()
        if self._out is not None:
            self._out.close()
            self._out = None

    def say(self, line: str) -> None:
        """Print ``line`` on stdout now."""
        with self._lock:
            if self._out is None:
                print(line, flush=True)
            else:
                sys.stdout.flush()  # what the command printed before comes first
                self._out.write(line + "\n")
                self._out.flush()
            self._last_line = time.monotonic()

    @contextmanager
    def phase(self, prefix: str, doing: str, follower: Follower | None = None) -> Iterator[None]:
        """Follow the block: the follower's lines as they come (and its last ones when the
        block ends), and ``<prefix>still <doing> · <n> s`` (since the block began) whenever it
        was quiet for ``quiet_seconds``; ``doing`` is the follower's own when there is one."""
        with self._lock:
            self._phase = _Phase(prefix, doing, follower, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._phase = None
                if follower is not None:
                    for line in follower.lines():
                        self.say(line)

    def _follow(self) -> None:
        look = max(MIN_LOOK_SECONDS, min(LOOK_SECONDS, self.quiet_seconds / 2))
        while not self._stopped.wait(look):
            with self._lock:
                phase = self._phase
                if phase is None:
                    continue
                doing = phase.doing
                if phase.follower is not None:
                    for line in phase.follower.lines():
                        self.say(line)
                    doing = phase.follower.doing()
                now = time.monotonic()
                if now - self._last_line >= self.quiet_seconds:
                    self.say(f"{phase.prefix}still {doing} · {now - phase.began:.1f} s")


def _own_stdout() -> TextIO | None:
    """A stream on a copy of stdout's file descriptor, taken now; None when stdout has none
    (a test's capture).

    While a Dagster step runs, the instance's compute log manager points descriptor 1 at the
    step's log file and copies that file to the terminal from another process, later: a line
    printed there during a step arrives after lines printed since, or among the next
    command's. The copy taken before any step keeps pointing at the terminal.
    """
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return os.fdopen(os.dup(descriptor), "w", encoding=encoding, errors="replace")


class RunSteps:
    """A Dagster run's asset writes and finished steps as lines, read from the instance's
    event log as the run stores them: the follower of a phase that executes the run in this
    process (``execute_in_process(run_id=...)``, its id chosen beforehand)."""

    def __init__(self, instance: dg.DagsterInstance, run_id: str, prefix: str) -> None:
        # Imported here, not with the module: a command prints before it loads Dagster.
        from dagster import DagsterEventType

        self._instance = instance
        self._run_id = run_id
        self._prefix = prefix
        self._of_type = {
            DagsterEventType.STEP_START,
            DagsterEventType.STEP_SUCCESS,
            DagsterEventType.STEP_FAILURE,
            DagsterEventType.ASSET_MATERIALIZATION,
        }
        self._cursor: str | None = None
        self._running: dict[str, float] = {}  # step key -> when it started
        self._written: set[str] = set()
        self._ended = 0

    def lines(self) -> list[str]:
        """A line per asset written and per step ended since the last call.

        An asset's line comes with its first materialization in the run: a ranged run reports
        one per day, all from its one write.
        """
        found = self._instance.get_records_for_run(
            self._run_id, cursor=self._cursor, of_type=self._of_type
        )
        self._cursor = found.cursor
        lines: list[str] = []
        for record in found.records:
            entry = record.event_log_entry
            event, step = entry.dagster_event, entry.step_key or "-"
            if event is None:
                continue
            took = f"({record.timestamp - self._running.get(step, record.timestamp):.1f} s)"
            materialization = entry.asset_materialization
            if event.is_step_start:
                self._running[step] = record.timestamp
            elif materialization is not None:
                asset = materialization.asset_key.to_user_string()
                if asset not in self._written:
                    self._written.add(asset)
                    lines.append(f"{self._prefix}{asset} {write_outcome(materialization)} {took}")
            elif event.is_step_success or event.is_step_failure:
                self._running.pop(step, None)
                self._ended += 1
                ended = "done" if event.is_step_success else "FAILED"
                lines.append(f"{self._prefix}step {step} {ended} {took}")
        return lines

    def doing(self) -> str:
        """The steps running now, or where the run is between them."""
        if self._running:
            return f"running {', '.join(sorted(self._running))}"
        return "finishing the run" if self._ended else "starting the run"


def write_outcome(materialization: dg.AssetMaterialization) -> str:
    """What a write did, from the lake IO manager's metadata: ``written: committed version
    N``, ``written: unchanged, no commit``, or ``written`` without that metadata."""
    md = materialization.metadata
    if "committed" not in md:
        return "written"
    if md["committed"].value:
        version = md["delta_version"].value if "delta_version" in md else "?"
        return f"written: committed version {version}"
    return "written: unchanged, no commit"
