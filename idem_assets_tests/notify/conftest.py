"""Fixtures: real notification servers on 127.0.0.1 backed by SQLite files in tmp_path."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from idem_assets.notify import NotificationServer

StartServer = Callable[..., NotificationServer]


@pytest.fixture
def token() -> str:
    """A distinctive bearer token, easy to grep for in logs and error messages."""
    return f"tok-{secrets.token_hex(12)}"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The SQLite file of the service under test."""
    return tmp_path / "notify.sqlite3"


@pytest.fixture
def start_server(db_path: Path, token: str) -> Iterator[StartServer]:
    """Start NotificationServers (default: the test's db and token); all stopped at teardown."""
    started: list[NotificationServer] = []

    def start(**kwargs: Any) -> NotificationServer:
        kwargs.setdefault("db_path", db_path)
        kwargs.setdefault("token", token)
        server = NotificationServer(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
