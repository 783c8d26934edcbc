"""A stream ingester in its own process whose progress steps are crash points.

``python -m idem_assets_tests.reliability.stream_child LANDING LAKE STORE_URL`` ingests
the events stream until drained (waiting out a dead ingester's lease). Every step the
ingester reports is passed to ``crash_point("stream.<step>")``, so ``IDEM_CRASH_AT``
(e.g. ``stream.committed:2``) kills it at that step of the N-th batch reaching it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets.faults import crash_point
from idem_assets.lake import LakeTable
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import StreamIngester, StreamSettings, StreamStep

FILES_PER_BATCH = 2
LEASE_SECONDS = 1.0
DEADLINE_SECONDS = 60.0


def ingester(
    store: CheckpointStore, landing: str, lake: str, observe: bool = True
) -> StreamIngester:
    """The events stream ingester over a landing folder and lake."""
    settings = StreamSettings(
        max_files_per_batch=FILES_PER_BATCH, max_batches_per_run=100, lease_seconds=LEASE_SECONDS
    )

    def observer(step: StreamStep) -> None:
        crash_point(f"stream.{step.step}")

    return StreamIngester(
        store,
        EVENTS_STREAM,
        landing,
        LakeTable(str(Path(lake) / EVENTS_STREAM.name)),
        LakeTable(str(Path(lake) / "quarantine")),
        settings=settings,
        observer=observer if observe else None,
    )


def drain(landing: str, lake: str, url: str, observe: bool = True) -> int:
    """Run until the stream is drained; returns how many batches this process finished."""
    finished = 0
    deadline = time.monotonic() + DEADLINE_SECONDS
    with open_store(url) as store:
        worker = ingester(store, landing, lake, observe)
        while time.monotonic() < deadline:
            report = worker.run()
            finished += len(report.outcomes)
            if report.stopped == "drained":
                return finished
            time.sleep(0.05)
    raise TimeoutError(f"stream not drained after {DEADLINE_SECONDS} s")


if __name__ == "__main__":
    print(drain(sys.argv[1], sys.argv[2], sys.argv[3]), flush=True)
