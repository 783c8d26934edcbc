"""A stream ingester in its own process whose progress steps are crash points.

``python -m idem_assets_tests.reliability.stream_child LANDING LAKE STORE_URL [CLOCK_AHEAD]``
ingests the events stream until drained. Every step the ingester reports is passed to
``crash_point("stream.<step>")``, so ``IDEM_CRASH_AT`` (e.g. ``stream.committed:2``) kills it
at that step of the N-th batch reaching it. With ``CLOCK_AHEAD`` (seconds) its store's clock
runs that far ahead of the database's: a restart past a dead ingester's lease, not waiting.
"""

from __future__ import annotations

import sys
from pathlib import Path

from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets.faults import crash_point
from idem_assets.lake import LakeTable
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import StreamIngester, StreamSettings, StreamStep
from idem_assets_tests.checkpoint.clock import ahead_of_store

FILES_PER_BATCH = 2
LEASE_SECONDS = 60.0  # never waited out: a restart's clock starts past a dead holder's
MAX_RUNS = 10


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


def drain(
    landing: str, lake: str, url: str, observe: bool = True, clock_ahead: float | None = None
) -> int:
    """Run until the stream is drained; returns how many batches this process finished.

    Nothing else holds the stream: a "busy" stop (a live lease) is an error, not a wait.
    """
    finished = 0
    clock = None if clock_ahead is None else ahead_of_store(url, clock_ahead)
    with open_store(url, clock=clock) as store:
        worker = ingester(store, landing, lake, observe)
        for _ in range(MAX_RUNS):
            report = worker.run()
            finished += len(report.outcomes)
            if report.stopped == "drained":
                return finished
            if report.stopped == "busy":
                raise RuntimeError(f"stream busy: {report.detail}")
    raise RuntimeError(f"stream not drained after {MAX_RUNS} runs")


if __name__ == "__main__":
    ahead = float(sys.argv[4]) if len(sys.argv) > 4 else None
    print(drain(sys.argv[1], sys.argv[2], sys.argv[3], clock_ahead=ahead), flush=True)
