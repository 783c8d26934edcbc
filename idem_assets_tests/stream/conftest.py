"""Stream fixtures: a landing folder, a lake and a checkpoint store (SQLite or PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets_tests.stream.world import StreamWorld


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
