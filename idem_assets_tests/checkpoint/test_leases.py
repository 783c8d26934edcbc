"""Leases: expiry in real seconds, heartbeats, stale holders, and SIGKILLed workers."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from idem_assets.checkpoint import LeaseLost, Status, open_store
from idem_assets_tests.checkpoint.clock import SteppedClock
from idem_assets_tests.checkpoint.worker import spawn
from idem_assets_tests.waiting import wait_for_exit, wait_until

SCOPE = "payments/2024-03-01"


def test_two_second_lease_with_the_real_clock(store_url: str) -> None:
    with open_store(store_url) as holder:
        holder.register(SCOPE, [(f"r{n}", None) for n in range(5)])
        before = time.time()
        claims = holder.claim(SCOPE, "holder", lease_seconds=2)
        after = time.time()
    expires = min(c.lease_expires_at for c in claims)
    assert len(claims) == 5
    # Two seconds after the claim on the database's clock (seconds, not days); the slack is
    # the database's and this process's clocks reading a little apart.
    assert before + 1.5 <= expires <= after + 2.5

    # The rival judges the lease on a clock the test moves, on the database's time.
    rival_clock = SteppedClock(expires - 0.05)
    with open_store(store_url, clock=rival_clock) as rival:
        assert rival.claim(SCOPE, "rival", lease_seconds=2) == []

        rival_clock.advance(0.1)
        taken = rival.claim(SCOPE, "rival", lease_seconds=2)
        assert [(c.record_id, c.attempts) for c in taken] == [(f"r{n}", 2) for n in range(5)]


def test_heartbeat_keeps_the_record(store_url: str, clock: SteppedClock) -> None:
    with open_store(store_url, clock=clock) as worker, open_store(store_url, clock=clock) as rival:
        worker.register(SCOPE, [("r", None)])
        [claim] = worker.claim(SCOPE, "worker", lease_seconds=5)
        clock.advance(4)
        claim = worker.extend(claim, 5)
        assert claim.lease_expires_at == clock.now + 5
        clock.advance(4)
        assert rival.claim(SCOPE, "rival", lease_seconds=5) == []
        clock.advance(1)
        [stolen] = rival.claim(SCOPE, "rival", lease_seconds=5)
        assert stolen.attempts == 2
        with pytest.raises(LeaseLost, match="re-claimed by 'rival' for attempt 2"):
            worker.extend(claim, 5)


def test_expired_but_unclaimed_lease_still_finishes(store_url: str, clock: SteppedClock) -> None:
    with open_store(store_url, clock=clock) as store:
        store.register(SCOPE, [("r", None)])
        [claim] = store.claim(SCOPE, "slow", lease_seconds=5)
        clock.advance(60)  # nobody took it over: the token still proves ownership
        store.succeed(claim, {"late": True})
        assert store.get(SCOPE, "r").status is Status.SUCCEEDED  # type: ignore[union-attr]


def test_stale_holder_gets_lease_lost(store_url: str, clock: SteppedClock) -> None:
    with open_store(store_url, clock=clock) as stale, open_store(store_url, clock=clock) as fresh:
        stale.register(SCOPE, [("r", {"amount": 5})])
        [old] = stale.claim(SCOPE, "stale", lease_seconds=5)
        clock.advance(5)
        [new] = fresh.claim(SCOPE, "fresh", lease_seconds=5)
        for late_call in (
            lambda: stale.succeed(old, {"by": "stale"}),
            lambda: stale.fail(old, "late"),
            lambda: stale.release(old),
            lambda: stale.extend(old, 5),
        ):
            with pytest.raises(LeaseLost) as lost:
                late_call()
            assert "re-claimed by 'fresh' for attempt 2" in str(lost.value)
        fresh.succeed(new, {"by": "fresh"})
        with pytest.raises(LeaseLost, match="the record is succeeded"):
            stale.succeed(old, {"by": "stale"})
        tracker = fresh.get(SCOPE, "r")
        assert tracker is not None
        assert (tracker.status, tracker.result, tracker.attempts) == (
            Status.SUCCEEDED,
            {"by": "fresh"},
            2,
        )


def test_two_connections_never_share_a_record(store_url: str) -> None:
    with open_store(store_url) as first, open_store(store_url) as second:
        first.register(SCOPE, [(f"r{n:03d}", None) for n in range(100)])
        taken: list[str] = []
        while batch := first.claim(SCOPE, "a", lease_seconds=60, limit=7) + second.claim(
            SCOPE, "b", lease_seconds=60, limit=5
        ):
            taken += [c.record_id for c in batch]
        assert sorted(taken) == [f"r{n:03d}" for n in range(100)]


@pytest.mark.slow
def test_sigkilled_worker_records_come_back_after_the_lease(store_url: str, tmp_path: Path) -> None:
    with open_store(store_url) as store:
        store.register(SCOPE, [(f"r{n:02d}", {"n": n}) for n in range(20)], max_attempts=3)
    report = tmp_path / "held.json"
    worker = spawn(
        {
            "mode": "hold",
            "url": store_url,
            "scope": SCOPE,
            "owner": "doomed",
            "lease_seconds": 3,
            "limit": 10,
            "succeed_first": 3,
            "report": str(report),
        }
    )
    try:
        wait_until(report.exists, "the worker's report of its claims", process=worker, every=0.02)
    finally:
        worker.send_signal(signal.SIGKILL)
        assert wait_for_exit(worker, "the SIGKILLed worker to be reaped") == -signal.SIGKILL
    held = json.loads(report.read_text())
    unfinished = sorted(set(held["claimed"]) - set(held["succeeded"]))
    assert len(held["claimed"]) == 10 and len(unfinished) == 7

    # The survivor's clock: the database's time while the dead worker's lease still runs
    # (however long the kill took), then stepped.
    clock = SteppedClock(held["lease_expires_at"] - 1.0)
    with open_store(store_url, clock=clock) as survivor:
        early = survivor.claim(SCOPE, "survivor", lease_seconds=30)
        assert {c.record_id for c in early}.isdisjoint(held["claimed"])
        assert len(early) == 10
        for record_id in held["succeeded"]:
            assert survivor.get(SCOPE, record_id).status is Status.SUCCEEDED  # type: ignore[union-attr]

        clock.advance_to(held["lease_expires_at"] + 0.05)  # the dead worker's lease runs out
        recovered = survivor.claim(SCOPE, "survivor", lease_seconds=30)
        assert [c.record_id for c in recovered] == unfinished
        assert {c.attempts for c in recovered} == {2}
        tracker = survivor.get(SCOPE, unfinished[0])
        assert tracker is not None
        assert tracker.last_error == "lease held by doomed expired without a result"
