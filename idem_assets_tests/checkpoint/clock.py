"""A test clock for the checkpoint store."""

from __future__ import annotations


class SteppedClock:
    """A clock that moves only when told to, so lease and backoff tests need no sleeping."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds
