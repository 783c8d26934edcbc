"""Leases are judged by the store's clock: a worker whose wall clock is off changes nothing.

Each worker is a separate process whose ``time.time`` is shifted by an hour (ahead or
behind), as on a machine with a wrong clock or right after a clock jump. Without the
store's clock, the worker ahead would find every live lease expired and steal it, and a
lease taken by the worker behind would look expired to everyone else at once.
"""

from __future__ import annotations

import json
import time

import pytest

from idem_assets.checkpoint import open_store
from idem_assets_tests.checkpoint.clock import stepped_from
from idem_assets_tests.processes import run_python

SCOPE = "skew"
HOUR = 3600.0
_WORKER = """
import json, sys, time
real = time.time
time.time = lambda: real() + float(sys.argv[2])  # this machine's clock is off
from idem_assets.checkpoint import open_store
with open_store(sys.argv[1]) as store:
    claims = store.claim("skew", "skewed", lease_seconds=float(sys.argv[3]))
    print(json.dumps({"claimed": [c.record_id for c in claims], "now": store.now(),
                      "local": time.time()}))
"""


def _skewed_claim(url: str, skew: float, lease: float) -> dict:
    done = run_python("-c", _WORKER, url, str(skew), str(lease))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("skew", [HOUR, -HOUR], ids=["ahead", "behind"])
def test_a_worker_with_a_wrong_clock_reads_the_stores_clock(store_url: str, skew: float):
    with open_store(store_url) as store:
        store.register(SCOPE, [("r", None)])
    seen = _skewed_claim(store_url, skew, 5)
    assert seen["claimed"] == ["r"]
    assert abs(seen["local"] - seen["now"] - skew) < 5  # its own clock is an hour off...
    assert abs(seen["now"] - time.time()) < 5  # ...the store's is not


def test_a_worker_whose_clock_runs_ahead_does_not_steal_a_live_lease(store_url: str):
    with open_store(store_url) as holder:
        holder.register(SCOPE, [("r", None)])
        [claim] = holder.claim(SCOPE, "holder", lease_seconds=60)
        assert _skewed_claim(store_url, HOUR, 60)["claimed"] == []
        holder.succeed(claim, {"by": "holder"})
        assert holder.get(SCOPE, "r").result == {"by": "holder"}  # type: ignore[union-attr]


def test_a_lease_taken_by_a_worker_whose_clock_runs_behind_expires_on_time(store_url: str):
    with open_store(store_url) as store:
        store.register(SCOPE, [("r", None)])
    # A lease far longer than any pause of a loaded machine: live for the rival below.
    assert _skewed_claim(store_url, -HOUR, 60)["claimed"] == ["r"]
    with open_store(store_url) as rival:
        # Live for everyone: not an hour in the past.
        assert rival.claim(SCOPE, "rival", lease_seconds=60) == []
    # 60.5 seconds later on the database's clock (the rival's own clock is right; only the
    # worker that took the lease was skewed): a stepped clock started at the store's time.
    later = stepped_from(store_url)
    later.advance(60.5)
    with open_store(store_url, clock=later) as rival:
        # Expired for everyone: not an hour in the future.
        [taken] = rival.claim(SCOPE, "rival", lease_seconds=60)
        assert taken.attempts == 2


def test_a_local_clock_jump_does_not_move_the_stores_clock(store_url: str, monkeypatch):
    with open_store(store_url) as store:
        store.register(SCOPE, [("r", None)])
        [claim] = store.claim(SCOPE, "worker", lease_seconds=60)
        before = store.now()
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + HOUR)  # the wall clock jumps
        assert store.now() - before < 5
        # Still our lease: extending it works and sets it from the store's clock.
        extended = store.extend(claim, 60)
        assert extended.lease_expires_at - real() < 65
        # A second worker under the jumped wall clock finds the lease live.
        with open_store(store_url) as rival:
            assert rival.claim(SCOPE, "rival", lease_seconds=60) == []
        store.succeed(extended, {"by": "worker"})
