"""Tracker transitions: claim, succeed, fail, exhaust, release, ignore, re-drive."""

from __future__ import annotations

import pytest

from idem_assets.checkpoint import (
    CheckpointInputError,
    CheckpointStore,
    InvalidTransition,
    Status,
    UnknownRecord,
    backoff_seconds,
)
from idem_assets_tests.checkpoint.clock import SteppedClock

SCOPE = "notifications/2024-03-01"


def _records(count: int, start: int = 0) -> list[tuple[str, dict[str, int]]]:
    return [(f"rec-{index:04d}", {"n": index}) for index in range(start, start + count)]


def test_register_is_idempotent_and_never_resets(store: CheckpointStore) -> None:
    assert store.register(SCOPE, _records(5), max_attempts=1) == 5
    [claim] = store.claim(SCOPE, "w1", lease_seconds=30, record_ids=["rec-0000"])
    assert store.fail(claim, "boom") is Status.EXHAUSTED

    assert store.register(SCOPE, _records(7), max_attempts=9) == 2
    exhausted = store.get(SCOPE, "rec-0000")
    assert exhausted is not None
    assert (exhausted.status, exhausted.attempts, exhausted.max_attempts) == (
        Status.EXHAUSTED,
        1,
        1,
    )
    assert store.get(SCOPE, "rec-0006").max_attempts == 9  # type: ignore[union-attr]
    assert store.register(SCOPE, []) == 0
    assert store.counts(SCOPE) == {
        "pending": 6,
        "in_progress": 0,
        "failed": 0,
        "exhausted": 1,
        "succeeded": 0,
        "ignored": 0,
    }


def test_same_record_twice_in_one_call(store: CheckpointStore) -> None:
    assert store.register(SCOPE, [("a", {"x": 1}), ("a", {"x": 1})]) == 1
    with pytest.raises(CheckpointInputError, match="'b' appears twice .* different payloads"):
        store.register(SCOPE, [("b", {"x": 1}), ("b", {"x": 2})])
    assert store.get(SCOPE, "b") is None


def test_claim_counts_attempt_and_hands_out_payload(
    store: CheckpointStore, clock: SteppedClock
) -> None:
    store.register(SCOPE, _records(3))
    claims = store.claim(SCOPE, "w1", lease_seconds=30)
    assert [(c.record_id, c.attempts, c.payload) for c in claims] == [
        ("rec-0000", 1, {"n": 0}),
        ("rec-0001", 1, {"n": 1}),
        ("rec-0002", 1, {"n": 2}),
    ]
    assert {c.lease_expires_at for c in claims} == {clock.now + 30}
    tracker = store.get(SCOPE, "rec-0001")
    assert tracker is not None
    assert (tracker.status, tracker.lease_owner, tracker.lease_token) == (
        Status.IN_PROGRESS,
        "w1",
        claims[1].lease_token,
    )
    assert store.claim(SCOPE, "w2", lease_seconds=30) == []


def test_limit_and_record_ids(store: CheckpointStore) -> None:
    store.register(SCOPE, _records(10))
    first = store.claim(SCOPE, "w1", lease_seconds=30, limit=4)
    assert [c.record_id for c in first] == ["rec-0000", "rec-0001", "rec-0002", "rec-0003"]
    listed = store.claim(
        SCOPE,
        "w2",
        lease_seconds=30,
        record_ids=["rec-0001", "rec-0007", "rec-0008", "missing"],
        limit=5,
    )
    assert [c.record_id for c in listed] == ["rec-0007", "rec-0008"]
    assert store.claim(SCOPE, "w2", lease_seconds=30, record_ids=[]) == []
    assert store.counts(SCOPE)["in_progress"] == 6


def test_succeed_stores_result_and_is_terminal(store: CheckpointStore, clock: SteppedClock) -> None:
    store.register(SCOPE, _records(1))
    [claim] = store.claim(SCOPE, "w1", lease_seconds=30)
    store.succeed(claim, {"delivery": "d-1"})
    store.succeed(claim, {"delivery": "d-1"})  # a repeated call by the holder is a no-op
    tracker = store.get(SCOPE, claim.record_id)
    assert tracker is not None
    assert (tracker.status, tracker.result, tracker.next_attempt_at, tracker.lease_expires_at) == (
        Status.SUCCEEDED,
        {"delivery": "d-1"},
        None,
        None,
    )
    clock.advance(10_000)
    assert store.claim(SCOPE, "w2", lease_seconds=30) == []


def test_fail_backs_off_then_retries_until_exhausted(
    store: CheckpointStore, clock: SteppedClock
) -> None:
    store.register(SCOPE, _records(1), max_attempts=3)
    [first] = store.claim(SCOPE, "w1", lease_seconds=30)
    assert store.fail(first, "HTTP 503") is Status.FAILED
    failed = store.get(SCOPE, first.record_id)
    assert failed is not None
    assert failed.next_attempt_at == clock.now + backoff_seconds(1) == clock.now + 30
    assert failed.last_error == "HTTP 503"

    clock.advance(29)
    assert store.claim(SCOPE, "w1", lease_seconds=30) == []
    clock.advance(1)
    [second] = store.claim(SCOPE, "w2", lease_seconds=30)
    assert second.attempts == 2
    assert store.fail(second, "HTTP 503", retry_in_seconds=5) is Status.FAILED
    clock.advance(5)
    [third] = store.claim(SCOPE, "w1", lease_seconds=30)
    assert (third.attempts, third.is_last_attempt) == (3, True)
    assert store.fail(third, "HTTP 500") is Status.EXHAUSTED
    assert store.fail(third, "HTTP 500") is Status.EXHAUSTED  # repeated: no-op
    clock.advance(10_000)
    assert store.claim(SCOPE, "w1", lease_seconds=30) == []
    [dead] = store.dead_letters(SCOPE)
    assert (dead.record_id, dead.attempts, dead.last_error) == (first.record_id, 3, "HTTP 500")


def test_fail_keeps_exception_and_bounded_traceback(store: CheckpointStore) -> None:
    store.register(SCOPE, _records(2))
    first, second = store.claim(SCOPE, "w1", lease_seconds=30)
    try:
        raise ConnectionError("peer reset")
    except ConnectionError as error:
        store.fail(first, error)
    tracker = store.get(SCOPE, first.record_id)
    assert tracker is not None and tracker.last_traceback is not None
    assert tracker.last_error == "ConnectionError: peer reset"
    assert "raise ConnectionError" in tracker.last_traceback

    store.fail(second, "x" * 100_000, "frame\n" * 50_000 + "FINAL LINE")
    bounded = store.get(SCOPE, second.record_id)
    assert bounded is not None and bounded.last_error and bounded.last_traceback
    assert len(bounded.last_error) == 4096 and "characters cut" in bounded.last_error
    assert len(bounded.last_traceback) == 32 * 1024
    assert bounded.last_traceback.endswith("FINAL LINE")


def test_expired_lease_on_last_attempt_exhausts(
    store: CheckpointStore, clock: SteppedClock
) -> None:
    store.register(SCOPE, _records(2), max_attempts=2)
    store.claim(SCOPE, "crashed-1", lease_seconds=10)
    clock.advance(10)
    again = store.claim(SCOPE, "crashed-2", lease_seconds=10)
    assert [c.attempts for c in again] == [2, 2]
    clock.advance(10)
    assert store.claim(SCOPE, "w3", lease_seconds=10) == []
    dead = store.dead_letters(SCOPE)
    assert [(t.record_id, t.attempts) for t in dead] == [("rec-0000", 2), ("rec-0001", 2)]
    assert dead[0].last_error == "lease held by crashed-2 expired without a result"


def test_release_does_not_count_an_attempt(store: CheckpointStore) -> None:
    store.register(SCOPE, _records(1), max_attempts=1)
    for _ in range(3):
        [claim] = store.claim(SCOPE, "w1", lease_seconds=30)
        assert claim.attempts == 1
        store.release(claim)
        store.release(claim)  # repeated: no-op
    tracker = store.get(SCOPE, "rec-0000")
    assert tracker is not None
    assert (tracker.status, tracker.attempts) == (Status.PENDING, 0)


def test_redrive_resets_attempts_and_counts(store: CheckpointStore) -> None:
    other = "notifications/2024-03-02"
    for scope in (SCOPE, other):
        store.register(scope, _records(3), max_attempts=1)
        for claim in store.claim(scope, "w1", lease_seconds=30):
            store.fail(claim, "gone")
    with pytest.raises(CheckpointInputError, match="record_ids need a scope"):
        store.redrive(record_ids=["rec-0000"])
    assert store.redrive(SCOPE, ["rec-0001", "missing"]) == 1
    assert store.redrive(SCOPE) == 2
    assert store.redrive(SCOPE) == 0
    assert len(store.dead_letters()) == 3 and store.dead_letters(SCOPE) == []
    revived = store.get(SCOPE, "rec-0001")
    assert revived is not None
    assert (revived.status, revived.attempts, revived.redrive_count) == (Status.PENDING, 0, 1)
    assert [c.attempts for c in store.claim(SCOPE, "w2", lease_seconds=30)] == [1, 1, 1]
    assert store.redrive() == 3
    assert store.counts(other)["pending"] == 3


def test_ignore_rules(store: CheckpointStore, clock: SteppedClock) -> None:
    store.register(SCOPE, _records(5), max_attempts=1)
    live, done, failed, expired = store.claim(SCOPE, "w1", lease_seconds=30, limit=4)
    store.succeed(done, None)
    store.fail(failed, "no")
    store.ignore(SCOPE, "rec-0004", "customer unsubscribed")
    store.ignore(SCOPE, failed.record_id, "fixed by hand")
    with pytest.raises(InvalidTransition, match="'rec-0000' .* is in_progress and cannot"):
        store.ignore(SCOPE, live.record_id, "too early")
    with pytest.raises(InvalidTransition, match="is succeeded"):
        store.ignore(SCOPE, done.record_id, "too late")
    with pytest.raises(UnknownRecord, match="no tracker for record 'nope'"):
        store.ignore(SCOPE, "nope", "x")
    with pytest.raises(CheckpointInputError, match="reason must be a non-empty string"):
        store.ignore(SCOPE, "rec-0004", " ")
    clock.advance(30)
    store.ignore(SCOPE, expired.record_id, "worker died; handled elsewhere")
    ignored = store.list(SCOPE, [Status.IGNORED])
    assert [(t.record_id, t.ignored_reason) for t in ignored] == [
        ("rec-0002", "fixed by hand"),
        ("rec-0003", "worker died; handled elsewhere"),
        ("rec-0004", "customer unsubscribed"),
    ]
    assert store.redrive(SCOPE) == 0
    clock.advance(10_000)
    assert store.claim(SCOPE, "w2", lease_seconds=30) == []


def test_list_counts_and_retryable(store: CheckpointStore, clock: SteppedClock) -> None:
    late = "notifications/2024-03-02"
    store.register(SCOPE, _records(3))
    store.register(late, _records(2))
    a, b, _ = store.claim(SCOPE, "w1", lease_seconds=100)
    store.fail(a, "x", retry_in_seconds=50)
    [c, d] = store.claim(late, "w2", lease_seconds=20)
    store.fail(c, "x", retry_in_seconds=40)
    start = clock.now
    assert store.retryable() == []
    assert store.retryable(now=start + 20) == [(late, start + 20)]  # d's lease expired
    assert store.retryable(now=start + 60) == [(late, start + 20), (SCOPE, start + 50)]
    store.succeed(b)
    assert [t.record_id for t in store.list(statuses=["failed"])] == ["rec-0000", "rec-0000"]
    assert [t.scope for t in store.list(statuses=["failed"])] == [SCOPE, late]
    assert len(store.list()) == 5 and store.list(statuses=[]) == []
    assert store.counts("unknown/scope") == dict.fromkeys(
        ["pending", "in_progress", "failed", "exhausted", "succeeded", "ignored"], 0
    )
    with pytest.raises(CheckpointInputError, match="unknown status 'done'"):
        store.list(statuses=["done"])
    assert d.record_id == "rec-0001"


def test_final_failure_exhausts_at_once(store):
    store.register("s", [("r", None)], max_attempts=5)
    (claim,) = store.claim("s", "w", lease_seconds=30)
    assert store.fail(claim, "payload rejected", final=True) == "exhausted"
    tracker = store.get("s", "r")
    assert tracker.status == "exhausted" and tracker.attempts == 1
    assert [t.record_id for t in store.dead_letters("s")] == ["r"]


def test_list_filters_by_record_id_prefix(store):
    store.register(
        "s",
        [
            ("2024-03-01/a", None),
            ("2024-03-01/b", None),
            ("2024-03-02/a", None),
            ("2024-03-0", None),
        ],
        max_attempts=5,
    )
    found = [t.record_id for t in store.list("s", prefix="2024-03-01/")]
    assert found == ["2024-03-01/a", "2024-03-01/b"]
    assert len(store.list("s")) == 4
    assert store.list("s", prefix="%") == []  # no wildcard meaning
