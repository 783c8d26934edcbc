"""Memos: values kept per key while their stamp holds, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from idem_assets.checkpoint import CheckpointInputError, CheckpointStore, Memo, open_store, sql

SCOPE = "landing/0123abcd"


def test_memos_round_trip_and_replace_in_place(store: CheckpointStore) -> None:
    assert store.remember(SCOPE, [Memo("a.csv", "[10, 1]", "sha-a"), Memo("b.csv", "[5]", None)])
    assert store.memos(SCOPE, ["a.csv", "b.csv", "missing.csv"]) == {
        "a.csv": Memo("a.csv", "[10, 1]", "sha-a"),
        "b.csv": Memo("b.csv", "[5]", None),
    }
    store.remember(SCOPE, [Memo("a.csv", "[11, 2]", {"sha": "sha-a2"})])
    assert store.memos(SCOPE, ["a.csv"])["a.csv"] == Memo("a.csv", "[11, 2]", {"sha": "sha-a2"})
    assert store.memos("another/scope", ["a.csv"]) == {}
    assert store.forget(SCOPE, ["a.csv", "missing.csv"]) == 1
    assert set(store.memos(SCOPE, ["a.csv", "b.csv"])) == {"b.csv"}


def test_ten_thousand_memos_in_one_call(store: CheckpointStore) -> None:
    memos = [Memo(f"day={n // 5}/part-{n}.parquet", f"[{n}]", f"{n:064x}") for n in range(10_000)]
    assert store.remember(SCOPE, memos) == 10_000
    found = store.memos(SCOPE, [m.key for m in memos])
    assert len(found) == 10_000
    assert found["day=1999/part-9999.parquet"].value == f"{9999:064x}"


def test_memo_input_is_checked(store: CheckpointStore) -> None:
    with pytest.raises(CheckpointInputError, match="memo key"):
        store.remember(SCOPE, [Memo("", "s", 1)])
    with pytest.raises(CheckpointInputError, match="is not JSON-serialisable"):
        store.remember(SCOPE, [Memo("k", "s", object())])
    with pytest.raises(CheckpointInputError, match="limit is 65536"):
        store.remember(SCOPE, [Memo("k", "s", "x" * 70_000)])
    assert store.memos(SCOPE, ["k"]) == {}


def test_a_version_1_store_is_upgraded_in_place(tmp_path: Path) -> None:
    """A store written before memos existed keeps its trackers and gains the memo table."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(sql.CREATE_VERSION_TABLE)
    for statement in sql.CREATE_SCHEMA[: -len(sql.CREATE_MEMOS)]:
        conn.execute(statement)
    conn.execute("INSERT INTO checkpoint_schema_version VALUES (1, 0)")
    conn.execute(
        "INSERT INTO checkpoint_trackers (scope, record_id, status, attempts, max_attempts, "
        "next_attempt_at, created_at, updated_at) VALUES ('s', 'r', 'pending', 0, 3, 0, 0, 0)"
    )
    conn.commit()
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        assert store.get("s", "r") is not None
        store.remember(SCOPE, [Memo("k", "s", 1)])
        assert store.memos(SCOPE, ["k"])["k"].value == 1
    versions = sqlite3.connect(path).execute("SELECT version FROM checkpoint_schema_version")
    assert sorted(v for (v,) in versions) == [1, sql.SCHEMA_VERSION]
