"""Exactly-once notifications through the checkpoint: crashes, concurrency, faults.

Real worker processes, a real HTTP service on 127.0.0.1, and the checkpoint store on
SQLite and on a real PostgreSQL server.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.notify import Faults, NotificationClient
from idem_assets_tests.waiting import output_at_exit, tail, wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _worker(store_url, server, token, n, **env) -> subprocess.Popen:
    environment = {
        **os.environ,
        "IDEM_NOTIFY_TOKEN": token,
        **{k.upper(): str(v) for k, v in env.items()},
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "idem_assets_tests.notify.outbox_worker",
            store_url,
            "notifications/test",
            server.url,
            str(n),
        ],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc) -> dict:
    out, err = output_at_exit(proc, "an outbox worker")
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _assert_exactly_once(server, token, n):
    client = NotificationClient(server.url, token)
    assert client.delivery_counts(min_count=2) == {}, "a key was delivered twice"
    stats = client.stats()
    assert stats["deliveries"] == stats["distinct_keys"] == n


def test_sigkill_mid_batch_then_rerun_delivers_each_once(store_url, start_server, token):
    n = 60
    # Longer than the rerun takes: only the rerun's clock, set ahead, ends the dead lease.
    lease = 30
    server = start_server(faults=Faults(latency_ms=40))
    victim = _worker(store_url, server, token, n, lease=lease, batch=10)
    wait_until(
        lambda: server.stats()["deliveries"] >= 15,
        "15 deliveries by the outbox worker",
        seen=server.stats,
        process=victim,
        output=lambda: tail(victim.stderr.read()),
        every=0.02,
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    delivered_before = server.stats()["deliveries"]
    assert 0 < delivered_before < n
    with open_store(store_url) as store:
        stranded = store.counts("notifications/test")[Status.IN_PROGRESS.value]
    assert stranded > 0, "the kill should leave a claimed batch in flight"
    # The rerun's clock runs lease + 0.1 s ahead of the database's: the dead worker's
    # lease has run out for it.
    rerun = _worker(store_url, server, token, n, lease=lease, batch=10, clock_ahead=lease + 0.1)
    report = _finish(rerun)
    _assert_exactly_once(server, token, n)
    # What the killed worker delivered plus what the rerun delivered is everything; keys it
    # sent without recording the answer came back as replays, not second deliveries.
    by_victim = n - report["delivered"]
    assert delivered_before <= by_victim < n
    with open_store(store_url) as store:
        counts = store.counts("notifications/test")
    assert counts[Status.SUCCEEDED.value] == n


@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_workers_never_double_deliver(store_url, start_server, token, workers):
    n = 200
    server = start_server(faults=Faults(latency_ms=5))
    # No worker dies here: the lease only has to outlast a batch on a loaded machine, so
    # that no live holder loses its records to another worker.
    procs = [_worker(store_url, server, token, n, lease=300, batch=5) for _ in range(workers)]
    reports = [_finish(p) for p in procs]
    assert sum(r["delivered"] for r in reports) == n
    assert sum(1 for r in reports if r["delivered"]) >= 2, "work should be shared"
    _assert_exactly_once(server, token, n)
    with open_store(store_url) as store:
        assert store.counts("notifications/test")[Status.SUCCEEDED.value] == n


def test_faulty_server_ends_delivered_once_or_dead_lettered(store_url, start_server, token):
    n = 80
    server = start_server(
        faults=Faults(
            error_rate=0.3,
            error_after_delivery_rate=0.1,
            latency_ms=10,
            latency_jitter_ms=10,
            seed=3,
        )
    )
    # Several separate worker runs (restarts), each with no in-attempt retries, so every
    # failure costs a tracked attempt; max_attempts must hold across the restarts.
    for _ in range(6):
        _finish(_worker(store_url, server, token, n, max_attempts=3, retry_in=0, max_retries=0))
    with open_store(store_url) as store:
        trackers = store.list("notifications/test")
    statuses = {t.status for t in trackers}
    assert statuses <= {Status.SUCCEEDED, Status.EXHAUSTED}
    assert all(t.attempts <= 3 for t in trackers)
    succeeded = [t for t in trackers if t.status == Status.SUCCEEDED]
    exhausted = [t for t in trackers if t.status == Status.EXHAUSTED]
    assert len(succeeded) + len(exhausted) == n and succeeded
    client = NotificationClient(server.url, token)
    assert client.delivery_counts(min_count=2) == {}
    counts = client.delivery_counts()
    # Every succeeded record was delivered exactly once; an exhausted one at most once
    # (error-after-delivery may have delivered it while every answer was a 5xx).
    assert len(counts) >= len(succeeded)
    assert all(t.attempts == 3 and t.last_error for t in exhausted)


def test_redrive_sends_dead_letters_with_their_original_keys(store_url, start_server, token):
    n = 10
    server = start_server(faults=Faults(error_rate=1.0))
    _finish(_worker(store_url, server, token, n, max_attempts=1))
    with open_store(store_url) as store:
        assert len(store.dead_letters("notifications/test")) == n
        assert store.redrive("notifications/test") == n
    server.set_faults(Faults())
    report = _finish(_worker(store_url, server, token, n, max_attempts=1))
    assert report["delivered"] == n
    _assert_exactly_once(server, token, n)
