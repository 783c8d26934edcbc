"""Opening stores: URLs, schema, restarts, and input checks that name the field."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

from idem_assets.checkpoint import (
    CheckpointError,
    CheckpointInputError,
    CheckpointStore,
    SchemaVersionError,
    Status,
    open_store,
    sql,
)
from idem_assets_tests.checkpoint.clock import SteppedClock
from idem_assets_tests.checkpoint.worker import spawn
from idem_assets_tests.waiting import WAIT_SECONDS, wait_for_exit

SCOPE = "orders-webhook/2024-03-01"


def test_attempts_survive_restart(store_url: str, clock: SteppedClock) -> None:
    with open_store(store_url, clock=clock) as first_run:
        first_run.register(SCOPE, [("r1", {"k": 1}), ("r2", None)], max_attempts=4)
        claims = first_run.claim(SCOPE, "run-1", lease_seconds=10)
        first_run.fail(claims[0], "timeout", retry_in_seconds=0)
    clock.advance(10)  # run-1 is gone; r2's lease runs out
    with open_store(store_url, clock=clock) as second_run:
        assert second_run.register(SCOPE, [("r1", {"k": 1}), ("r2", None)]) == 0
        again = second_run.claim(SCOPE, "run-2", lease_seconds=10)
        assert [(c.record_id, c.attempts, c.payload) for c in again] == [
            ("r1", 2, {"k": 1}),
            ("r2", 2, None),
        ]
        second_run.succeed(again[0], {"sent": True})
    with open_store(store_url, clock=clock) as third_run:
        tracker = third_run.get(SCOPE, "r1")
        assert tracker is not None
        assert (tracker.status, tracker.attempts, tracker.result) == (
            Status.SUCCEEDED,
            2,
            {"sent": True},
        )


def test_attempts_counted_across_processes(store_url: str) -> None:
    with open_store(store_url) as store:
        store.register(SCOPE, [(f"r-{n}", None) for n in range(3)])
    for run in range(2):
        spec = {"mode": "fail_all", "url": store_url, "scope": SCOPE, "owner": f"proc-{run}"}
        assert wait_for_exit(spawn(spec), f"worker {spec['owner']} to fail its claims") == 0
    with open_store(store_url) as store:
        claims = store.claim(SCOPE, "parent", lease_seconds=10)
        assert [c.attempts for c in claims] == [3, 3, 3]
        assert store.get(SCOPE, "r-0").last_error == "planned failure in proc-1"  # type: ignore[union-attr]


def test_schema_created_once_and_versioned(store_url: str) -> None:
    for _ in range(3):
        open_store(store_url).close()
    query = "SELECT COUNT(*), MAX(version) FROM checkpoint_schema_version"
    current, newer = sql.SCHEMA_VERSION, sql.SCHEMA_VERSION + 1
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute(query).fetchone() == (1, current)
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            conn.execute("INSERT INTO checkpoint_schema_version VALUES (?, 0)", (newer,))
    else:
        with psycopg.connect(store_url, autocommit=True) as conn:
            assert conn.execute(query).fetchone() == (1, current)
            conn.execute("INSERT INTO checkpoint_schema_version VALUES (%s, 0)", (newer,))
    with pytest.raises(
        SchemaVersionError, match=f"schema version {newer}; this code knows up to {current}"
    ):
        open_store(store_url)


def test_simultaneous_first_opens_create_one_schema(store_url: str) -> None:
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_at_once(owner: str) -> None:
        try:
            start.wait(timeout=WAIT_SECONDS)
            with open_store(store_url) as store:
                store.register(SCOPE, [(owner, None)])
        except BaseException as error:  # collected and re-raised by the test thread
            errors.append(error)

    threads = [threading.Thread(target=open_at_once, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT_SECONDS)
    assert errors == []
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"gave up after {WAIT_SECONDS:.0f} s waiting for the threads {alive}"
    with open_store(store_url) as store:
        assert [t.record_id for t in store.list(SCOPE)] == ["t0", "t1", "t2", "t3"]


def test_closed_store_refuses_work(store_url: str) -> None:
    store = open_store(store_url)
    store.close()
    store.close()
    with pytest.raises(CheckpointError, match="is closed"):
        store.counts(SCOPE)


def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///nested/dir/relative.db") as relative:
        relative.register(SCOPE, [("r", None)])
    assert (tmp_path / "nested" / "dir" / "relative.db").is_file()
    absolute = tmp_path / "absolute.db"
    with open_store(f"sqlite:///{absolute}") as store:
        assert store.backend == "sqlite"
    assert absolute.is_file()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///:memory:", "in-memory store is not durable"),
        ("sqlite:///", "must name a database file"),
        ("sqlite:///x.db?mode=ro", "query options are not supported"),
        ("mysql://u@h/db", "must start with 'sqlite:///' or 'postgresql://'"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(CheckpointInputError, match=message):
        open_store(url)


def test_connection_error_hides_password() -> None:
    with pytest.raises(CheckpointError) as caught:
        open_store("postgresql://app:s3cr3t-pw@127.0.0.1:1/checkpoints")
    assert "s3cr3t-pw" not in str(caught.value)
    assert "postgresql://app:***@127.0.0.1:1/checkpoints" in str(caught.value)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.register("", [("r", None)]), "scope must be a non-empty string"),
        (
            lambda s: s.register(SCOPE, [("r", None)], max_attempts=0),
            "max_attempts must be an inte",
        ),
        (lambda s: s.register(SCOPE, ["r"]), r"records\[0\] .* must be a \(record_id, payload\)"),
        (lambda s: s.register(SCOPE, [("", None)]), r"records\[0\] record_id must be a non-empty"),
        (lambda s: s.register(SCOPE, [("r", {"v": float("nan")})]), "payload of record 'r' is not"),
        (lambda s: s.register(SCOPE, [("big", {"b": "x" * 70_000})]), "payload of record 'big' is"),
        (lambda s: s.register(SCOPE, [("r" * 600, None)]), "600 characters; the limit is 512"),
        (lambda s: s.claim(SCOPE, "", lease_seconds=1), "owner must be a non-empty string"),
        (lambda s: s.claim(SCOPE, "w", lease_seconds=0), "lease_seconds must be > 0 seconds"),
        (lambda s: s.claim(SCOPE, "w", lease_seconds=float("inf")), "lease_seconds must be a fin"),
        (lambda s: s.claim(SCOPE, "w", lease_seconds="5"), "lease_seconds must be a finite"),
        (lambda s: s.claim(SCOPE, "w", lease_seconds=5, limit=0), "limit must be an integer >= 1"),
        (lambda s: s.claim(SCOPE, "w", lease_seconds=5, record_ids="r1"), "not one string"),
    ],
)
def test_input_errors_name_the_field(store: CheckpointStore, call: object, message: str) -> None:
    with pytest.raises(CheckpointInputError, match=message):
        call(store)  # type: ignore[operator]
    assert store.list() == []


def test_result_is_checked_before_the_lease_is_spent(store: CheckpointStore) -> None:
    store.register(SCOPE, [("r", None)])
    [claim] = store.claim(SCOPE, "w", lease_seconds=30)
    with pytest.raises(CheckpointInputError, match="result of record 'r' is not JSON"):
        store.succeed(claim, {"when": object()})
    with pytest.raises(CheckpointInputError, match="retry_in_seconds must be >= 0"):
        store.fail(claim, "x", retry_in_seconds=-1)
    assert store.get(SCOPE, "r").status is Status.IN_PROGRESS  # type: ignore[union-attr]
    store.succeed(claim, {"ok": True})
    assert store.get(SCOPE, "r").result == {"ok": True}  # type: ignore[union-attr]
