"""Checkpoint store fixtures: every store test runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets_tests.checkpoint.clock import SteppedClock


@pytest.fixture
def clock() -> SteppedClock:
    """A stepped clock shared by every store a test opens."""
    return SteppedClock()


@pytest.fixture
def store(store_url: str, clock: SteppedClock) -> Iterator[CheckpointStore]:
    """An open store on the stepped clock."""
    with open_store(store_url, clock=clock) as opened:
        yield opened
