"""A process that changes checkpoint trackers as fast as it can, to be SIGKILLed mid-write.

``python -m idem_assets_tests.reliability.hammer STORE_URL SCOPE BATCHES CLOCK_AHEAD``
registers batches of ``BATCH_SIZE`` records and drives them through the state machine in a
tight loop, following a fixed protocol the parent can check after every kill:

- its store's clock runs ``CLOCK_AHEAD`` seconds ahead of the database's: the parent sets
  it past every lease a dead life left (and behind no earlier life's clock), so those
  records are due at once and nothing is ever waited out;
- a claim takes up to ``CLAIM_LIMIT`` due records (lease ``LEASE_SECONDS``); a new batch
  is registered whenever fewer came back;
- records ``i % 5 == 0`` fail their first attempt (retry at once), records ``i % 7 == 0``
  are released once on their first attempt, every other claim succeeds with a result
  naming the claim's token and attempt.

It prints ``ready`` once the store is open, then every ``REPORT_EVERY`` transitions a
line ``ops N busy F``: F is the share of wall time spent inside store calls.
"""

from __future__ import annotations

import sys
import time

from idem_assets.checkpoint import CheckpointStore, Claim, open_store
from idem_assets_tests.checkpoint.clock import ahead_of_store

BATCH_SIZE = 20
CLAIM_LIMIT = 7
LEASE_SECONDS = 30.0  # never waited out: each life's clock starts past the last one's
REPORT_EVERY = 50
PLANNED_ERROR = "planned first-attempt failure"


def record_ids(batch: int) -> list[str]:
    """The ids of one registered batch."""
    return [f"b{batch:05d}-{i:02d}" for i in range(BATCH_SIZE)]


def index_of(record_id: str) -> int:
    """The record's position in its batch."""
    return int(record_id.rsplit("-", 1)[1])


def settle(store: CheckpointStore, claim: Claim, released: set[str]) -> None:
    """Finish one claim the way the protocol says."""
    i = index_of(claim.record_id)
    if i % 5 == 0 and claim.attempts == 1:
        store.fail(claim, PLANNED_ERROR, retry_in_seconds=0)
    elif i % 7 == 0 and claim.attempts == 1 and claim.record_id not in released:
        released.add(claim.record_id)
        store.release(claim)
    else:
        store.succeed(claim, {"token": claim.lease_token, "attempts": claim.attempts})


def main(url: str, scope: str, batches: int, clock_ahead: float) -> None:
    """Hammer the store until killed (or until every batch is settled)."""
    ops, busy, started = 0, 0.0, time.perf_counter()
    released: set[str] = set()
    with open_store(url, clock=ahead_of_store(url, clock_ahead)) as store:
        registered = {t.record_id.split("-")[0] for t in store.list(scope)}
        print("ready", flush=True)
        next_batch = len(registered)
        while True:
            call, before = time.perf_counter(), ops
            claims = store.claim(scope, "hammer", lease_seconds=LEASE_SECONDS, limit=CLAIM_LIMIT)
            # New work only when the due pool runs dry, so the backlog stays small.
            if len(claims) < CLAIM_LIMIT and next_batch < batches:
                store.register(scope, [(r, {"batch": next_batch}) for r in record_ids(next_batch)])
                next_batch += 1
                ops += 1
            for claim in claims:
                settle(store, claim, released)
            busy += time.perf_counter() - call
            ops += 1 + len(claims)
            if ops // REPORT_EVERY != before // REPORT_EVERY:
                print(f"ops {ops} busy {busy / (time.perf_counter() - started):.3f}", flush=True)
            if not claims and next_batch >= batches:
                return  # nothing is due or held: every batch is settled


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
