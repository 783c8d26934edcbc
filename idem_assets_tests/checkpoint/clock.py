"""Clocks a test drives for the checkpoint store, so no test waits a lease or backoff out.

Dagster-free: worker processes import it without paying for Dagster. The resource on a
stepped clock is ``idem_assets_tests.harness.SteppedCheckpoint``.
"""

from __future__ import annotations

import time

from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets.checkpoint.leases import Clock


class SteppedClock:
    """A clock that moves only when told to, so lease and backoff tests need no sleeping."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds

    def advance_to(self, epoch_seconds: float) -> None:
        """Move the clock forward to ``epoch_seconds`` (never back)."""
        self.now = max(self.now, epoch_seconds)


def stepped_from(url: str) -> SteppedClock:
    """A stepped clock starting at the store's own time (the database's): it can step past
    leases that other connections and processes took on the database's clock."""
    with open_store(url) as store:
        return SteppedClock(store.now())


def stepped_past_leases(url: str) -> SteppedClock:
    """A stepped clock past every lease still held (see ``lease_lead``): every lease a killed
    holder left is over on it."""
    with open_store(url) as store:
        return SteppedClock(_past_leases(store))


def lease_lead(url: str) -> float:
    """How far ahead of the store's clock a clock must run for every lease held now to be
    over, and to run behind no clock that wrote a record (0.0 when the store's own will do):
    a process on that clock (``ahead_of_store``) takes a dead holder's records at once
    instead of waiting its leases out."""
    with open_store(url) as store:
        return _past_leases(store) - store.now()


def ahead_of_store(url: str, seconds: float) -> Clock:
    """The store's clock (the database's) moved ``seconds`` ahead: read once, then run on
    with this process's monotonic clock, as the store's own clock does."""
    with open_store(url) as store:
        start, at = store.now(), time.monotonic()
    return lambda: start + seconds + (time.monotonic() - at)


def _past_leases(store: CheckpointStore) -> float:
    # No earlier than the store's time, the end of any lease still held, or any time a
    # record was written at: a process whose clock ran ahead wrote it, and its failed and
    # released records are due from then on.
    trackers = store.list()
    return max(
        [
            store.now(),
            *(tracker.updated_at for tracker in trackers),
            *(tracker.lease_expires_at for tracker in trackers if tracker.lease_expires_at),
        ]
    )
