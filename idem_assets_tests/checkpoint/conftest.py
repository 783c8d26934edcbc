"""Checkpoint store fixtures: every store test runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets_tests.checkpoint.clock import SteppedClock

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of an empty store: a SQLite file in tmp_path or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'checkpoint.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def clock() -> SteppedClock:
    """A stepped clock shared by every store a test opens."""
    return SteppedClock()


@pytest.fixture
def store(store_url: str, clock: SteppedClock) -> Iterator[CheckpointStore]:
    """An open store on the stepped clock."""
    with open_store(store_url, clock=clock) as opened:
        yield opened
