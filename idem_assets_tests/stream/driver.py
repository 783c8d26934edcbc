"""A stream ingester run as its own OS process by the crash and concurrency tests.

`python -m idem_assets_tests.stream.driver '<json spec>'`. The spec names the world (landing,
lake, store url), the settings, an `events` file where every step the ingester passes is
appended as a JSON line, and optionally `kill`: {"step", "seq", "index"?}. At that step the
process SIGKILLs itself: the kill comes from this test-only observer, not from any hook in
the library. With `drain`, it touches `ready_file` (if given) once its store is open, waits
for `go_file` (if given), then runs until nothing is left, waiting while another live
ingester holds a batch. With `turn_with` (the other ingester's `events` file) it waits after
each batch it committed until the other has committed as many or has drained: the two take
turns however fast either machine is, so both do real work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from idem_assets.checkpoint import open_store
from idem_assets.lake import LakeTable
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import StreamIngester, StreamSettings, StreamStep

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def spawn(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start a driver process for `spec`."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "idem_assets_tests.stream.driver", json.dumps(spec)],
        cwd=PROJECT_ROOT,
        env=env,
    )


def read_events(path: Path) -> list[dict[str, Any]]:
    """The steps a driver logged, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _matches(kill: dict[str, Any] | None, step: StreamStep) -> bool:
    if kill is None or step.step != kill["step"] or step.seq != kill["seq"]:
        return False
    return "index" not in kill or step.detail.get("index") == kill["index"]


def main(spec: dict[str, Any]) -> None:
    """Run the ingester described by `spec`."""
    events = Path(spec["events"]).open("a", encoding="utf-8")
    owner = spec["owner"]
    committed = 0

    def observe(step: StreamStep) -> None:
        nonlocal committed
        committed += step.step == "committed"
        record = {"owner": owner, "step": step.step, "seq": step.seq, **step.detail}
        events.write(json.dumps(record, default=str) + "\n")
        events.flush()
        if _matches(spec.get("kill"), step):
            os.fsync(events.fileno())
            os.kill(os.getpid(), signal.SIGKILL)

    lake = Path(spec["lake"])
    settings = StreamSettings(
        max_files_per_batch=spec["max_files"],
        max_batches_per_run=spec["max_batches"],
        lease_seconds=spec["lease_seconds"],
    )
    with open_store(spec["url"]) as store:
        ingester = StreamIngester(
            store,
            EVENTS_STREAM,
            spec["landing"],
            LakeTable(str(lake / EVENTS_STREAM.name)),
            LakeTable(str(lake / "quarantine")),
            owner=owner,
            settings=settings,
            observer=observe,
        )
        if not spec.get("drain"):
            ingester.run()
            return
        if spec.get("ready_file"):
            Path(spec["ready_file"]).touch()
        go = spec.get("go_file")
        while go and not Path(go).exists():
            time.sleep(0.005)
        deadline = time.monotonic() + spec.get("deadline_seconds", 300)
        other = spec.get("turn_with")
        while time.monotonic() < deadline:
            report = ingester.run()
            if report.stopped == "drained":
                observe(StreamStep("drained", -1, {}))
                return
            if report.stopped == "busy":
                observe(StreamStep("busy", -1, {"detail": report.detail}))
                time.sleep(0.02)
            while other and not _caught_up(Path(other), committed):
                if time.monotonic() > deadline:
                    raise SystemExit(f"driver: {other} did not take its turn before the deadline")
                time.sleep(0.02)
        raise SystemExit("driver: the stream did not drain before the deadline")


def _caught_up(other: Path, committed: int) -> bool:
    """Whether the ingester logging to ``other`` committed ``committed`` batches, or drained."""
    steps = [event["step"] for event in read_events(other)]
    return "drained" in steps or steps.count("committed") >= committed


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
