"""Memos: values kept per key while their stamp holds, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
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


def test_remember_if_inserts_only_a_new_key_and_replaces_only_what_was_read(
    store: CheckpointStore,
) -> None:
    first = Memo("offset", "table-a", {"acknowledged": 3, "handed_out": None})
    assert store.remember_if(SCOPE, first, None)
    assert not store.remember_if(SCOPE, Memo("offset", "table-a", {"acknowledged": 9}), None)
    read = store.memos(SCOPE, ["offset"])["offset"]
    assert read == first
    moved = Memo("offset", "table-a", {"acknowledged": 5, "handed_out": None})
    assert store.remember_if(SCOPE, moved, read)
    assert not store.remember_if(SCOPE, Memo("offset", "table-a", {"acknowledged": 4}), read)
    assert store.memos(SCOPE, ["offset"])["offset"] == moved
    # Stamp and value must both still match; key order is not part of a value.
    assert not store.remember_if(SCOPE, first, Memo("offset", "table-b", moved.value))
    reordered = Memo("offset", "table-a", {"handed_out": None, "acknowledged": 5})
    assert store.remember_if(SCOPE, Memo("offset", "table-a", None), reordered)
    assert store.remember_if(SCOPE, first, Memo("offset", "table-a", None))  # NULL matches NULL
    assert store.memos(SCOPE, ["offset"])["offset"] == first


def test_remember_if_compares_the_stored_json_exactly(store: CheckpointStore) -> None:
    store.remember(SCOPE, [Memo("k", "s", {"n": 1, "f": 1.5})])
    # Python calls 1 == True == 1.0; the stored text does not.
    assert not store.remember_if(SCOPE, Memo("k", "s", 2), Memo("k", "s", {"n": True, "f": 1.5}))
    assert not store.remember_if(SCOPE, Memo("k", "s", 2), Memo("k", "s", {"n": 1.0, "f": 1.5}))
    assert not store.remember_if(SCOPE, Memo("k", "s", 2), Memo("k", "s", None))
    assert store.remember_if(SCOPE, Memo("k", "s", 2), Memo("k", "s", {"f": 1.5, "n": 1}))
    assert store.forget(SCOPE, ["k"]) == 1
    assert not store.remember_if(SCOPE, Memo("k", "s", 3), Memo("k", "s", 2))  # gone
    assert store.memos(SCOPE, ["k"]) == {}
    with pytest.raises(CheckpointInputError, match="is not memo"):
        store.remember_if(SCOPE, Memo("k", "s", 3), Memo("other", "s", 2))


def test_racing_compare_and_sets_each_win_once(store_url: str) -> None:
    """Four connections add one to a counter 25 times each by read, compare-and-set, retry:
    every value from 1 to 100 is written by exactly one of them."""
    with open_store(store_url) as store:
        assert store.remember_if(SCOPE, Memo("counter", "s", 0), None)

    def add(_: int) -> list[int]:
        won = []
        with open_store(store_url) as mine:
            while len(won) < 25:
                read = mine.memos(SCOPE, ["counter"])["counter"]
                if mine.remember_if(SCOPE, Memo("counter", "s", read.value + 1), read):
                    won.append(read.value + 1)
        return won

    with ThreadPoolExecutor(4) as pool:
        wins = [value for won in pool.map(add, range(4)) for value in won]
    assert sorted(wins) == list(range(1, 101))
    with open_store(store_url) as store:
        assert store.memos(SCOPE, ["counter"])["counter"].value == 100
