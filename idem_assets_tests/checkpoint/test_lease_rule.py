"""One lease rule: the Python test of a live lease agrees with the store's claim statements."""

from __future__ import annotations

import pytest

from idem_assets.checkpoint import CheckpointStore, Status
from idem_assets.checkpoint.leases import lease_live
from idem_assets_tests.checkpoint.clock import SteppedClock


@pytest.mark.parametrize(
    ("elapsed", "live"), [(0.0, True), (9.999, True), (10.0, False), (25.0, False)]
)
def test_a_lease_is_live_exactly_until_the_store_hands_the_record_out_again(
    store: CheckpointStore, clock: SteppedClock, elapsed: float, live: bool
):
    store.register("s", [("r1", None)])
    (claim,) = store.claim("s", "first", lease_seconds=10.0)
    clock.advance(elapsed)
    tracker = store.get("s", "r1")
    assert tracker is not None and tracker.status is Status.IN_PROGRESS
    assert lease_live(tracker, store.now()) is live
    # The claim statement's rule: a live lease is never handed out, an expired one is.
    again = store.claim("s", "second", lease_seconds=10.0)
    assert [c.record_id for c in again] == ([] if live else ["r1"])
    if not live:
        assert again[0].lease_token != claim.lease_token and again[0].attempts == 2


def test_a_settled_record_holds_no_lease(store: CheckpointStore):
    store.register("s", [("r1", None)])
    (claim,) = store.claim("s", "first", lease_seconds=10.0)
    store.succeed(claim, {"ok": True})
    tracker = store.get("s", "r1")
    assert tracker is not None and not lease_live(tracker, store.now())
