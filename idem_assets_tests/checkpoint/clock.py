"""A test clock for the checkpoint store."""

from __future__ import annotations

from idem_assets.checkpoint import open_store
from idem_assets.resources import CheckpointResource


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


# Stepped clocks by name: Dagster builds resources again from their config, so a resource
# finds its clock by a name it carries as config.
_CLOCKS: dict[str, SteppedClock] = {}


class SteppedCheckpoint(CheckpointResource):
    """A ``CheckpointResource`` whose leases run on a registered ``SteppedClock``."""

    clock_name: str

    def clock(self) -> SteppedClock:  # type: ignore[override]
        """The stepped clock registered under ``clock_name``."""
        return _CLOCKS[self.clock_name]


def stepped_checkpoint(url: str) -> tuple[SteppedCheckpoint, SteppedClock]:
    """A checkpoint resource at ``url`` on a new stepped clock, and the clock."""
    clock = SteppedClock()
    name = f"clock-{len(_CLOCKS)}"
    _CLOCKS[name] = clock
    return SteppedCheckpoint(url=url, clock_name=name), clock
