"""A worker process for outbox tests: register records, then drain them against a server.

Run as ``python -m idem_assets_tests.notify.outbox_worker STORE_URL SCOPE SERVER_URL N``;
the token comes from IDEM_NOTIFY_TOKEN. With CLOCK_AHEAD (seconds) its store's clock runs
that far ahead of the database's: a test steps it past a dead worker's lease instead of
waiting the lease out. Prints one JSON report line at the end.
"""

import json
import os
import sys

from idem_assets.checkpoint import open_store
from idem_assets.checkpoint.leases import Clock
from idem_assets.notify import NotificationClient, idempotency_key
from idem_assets.notify.outbox import OutboxRecord, drain, register
from idem_assets_tests.checkpoint.clock import ahead_of_store


def records(n: int) -> list[OutboxRecord]:
    """The test's records: deterministic ids, keys and payloads."""
    return [
        OutboxRecord(f"r{i:05d}", idempotency_key("outbox-test", i), {"i": i}) for i in range(n)
    ]


def store_clock(url: str) -> Clock | None:
    """The database's clock moved CLOCK_AHEAD seconds ahead; None (the store's own) without."""
    ahead = float(os.environ.get("CLOCK_AHEAD", "0"))
    return ahead_of_store(url, ahead) if ahead else None


def main() -> None:
    """Register and drain, with knobs from the environment."""
    store_url, scope, server_url, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = NotificationClient(
        server_url,
        os.environ["IDEM_NOTIFY_TOKEN"],
        # Long: the test servers answer at once or fail on purpose; a timeout would only
        # be a loaded machine's slow answer, recorded as a failed attempt.
        timeout_seconds=float(os.environ.get("TIMEOUT", "60")),
        max_retries=int(os.environ.get("MAX_RETRIES", "0")),
        backoff_seconds=0.01,
    )
    with open_store(store_url, clock=store_clock(store_url)) as store:
        register(store, scope, records(n), max_attempts=int(os.environ.get("MAX_ATTEMPTS", "5")))
        report = drain(
            store,
            scope,
            client,
            owner=f"worker-{os.getpid()}",
            lease_seconds=float(os.environ.get("LEASE", "2")),
            batch_size=int(os.environ.get("BATCH", "10")),
            retry_in_seconds=float(os.environ.get("RETRY_IN", "0")),
        )
    print(
        json.dumps(
            {
                "delivered": report.delivered,
                "already": report.already_delivered,
                "failed": report.failed,
                "exhausted": report.exhausted,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
