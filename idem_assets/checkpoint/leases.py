"""Leases: when a claim expires, and the clock that judges it (``heartbeat.py`` renews them).

A claim holds its record ``in_progress`` until ``lease_expires_at``. Past that instant the
holder is presumed crashed or hung: the record is due again (the claim statements in
``sql.py`` hand it out once more, counting the attempt), it may be ignored, and a lake
write's record is reconciled against the Delta log. Every comparison uses the store's clock
(``DatabaseClock``: the database's time, so workers with skewed wall clocks agree), and
``lease_live`` is the one Python-side test of a held lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from idem_assets.checkpoint.model import Status, Tracker

Clock = Callable[[], float]
# How often the store's clock is read from the database again (between reads, this
# process's monotonic clock measures the time passed).
CLOCK_REFRESH_SECONDS = 30.0


class DatabaseClock:
    """Epoch seconds as the database sees them, advanced by this process's monotonic clock.

    Leases are compared against it, so a worker whose wall clock runs ahead (or jumps)
    neither steals a live lease nor keeps an expired one: every worker of a store reads the
    same clock, the database's, and a jump of the local wall clock does not move it.
    """

    def __init__(self, read: Callable[[], float], refresh: float = CLOCK_REFRESH_SECONDS) -> None:
        self._read = read
        self._refresh = refresh
        self._anchor: tuple[float, float] | None = None  # (database seconds, monotonic)

    def __call__(self) -> float:
        mono = time.monotonic()
        if self._anchor is None or mono - self._anchor[1] >= self._refresh:
            before = time.monotonic()
            seconds = self._read()
            # The read happened somewhere in [before, after]; take the middle.
            self._anchor = (seconds, (before + time.monotonic()) / 2)
            mono = time.monotonic()
        return self._anchor[0] + (mono - self._anchor[1])


def lease_live(tracker: Tracker, now: float) -> bool:
    """Whether a live holder still has ``tracker`` (in progress, lease not yet expired)."""
    return (
        tracker.status is Status.IN_PROGRESS
        and tracker.lease_expires_at is not None
        and tracker.lease_expires_at > now
    )
