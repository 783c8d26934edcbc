"""Stream fixtures: a landing folder, a lake and a checkpoint store (SQLite or PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets_tests.stream.world import StreamWorld

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store: a SQLite file in tmp_path or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


@pytest.fixture
def world(tmp_path: Path, store_url: str) -> StreamWorld:
    """An empty landing zone and lake in tmp_path, on the parametrised store."""
    return StreamWorld(tmp_path / "landing", tmp_path / "lake", store_url)


@pytest.fixture
def sqlite_world(tmp_path: Path) -> StreamWorld:
    """The same on SQLite only, for tests about files rather than stores."""
    return StreamWorld(
        tmp_path / "landing", tmp_path / "lake", f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"
    )
