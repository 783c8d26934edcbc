"""A checkpoint worker run as its own OS process by the crash and concurrency tests.

`python -m idem_assets_tests.checkpoint.worker '<json spec>'` with spec["mode"]:
- "hold": claim, succeed the first `succeed_first` claims, report, then wait to be killed;
- "fail_all": claim every due record, fail each with no backoff, exit;
- "drain": touch `ready_file`, wait for `go_file`, then claim in batches until the scope
  is finished, failing each planned record once, and log every claim and success to `log`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from idem_assets.checkpoint import CheckpointStore, Status, open_store

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UNFINISHED = (Status.PENDING, Status.FAILED, Status.IN_PROGRESS)


def planned_failure(record_id: str) -> bool:
    """Every 7th record fails its first attempt, so retries cross worker processes."""
    return int(record_id.rsplit("-", 1)[1]) % 7 == 0


def spawn(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start a worker process for `spec`."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "idem_assets_tests.checkpoint.worker", json.dumps(spec)],
        cwd=PROJECT_ROOT,
        env=env,
    )


def _write_atomically(path: Path, data: Any) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(path)


def _hold(store: CheckpointStore, spec: dict[str, Any]) -> None:
    claims = store.claim(
        spec["scope"], spec["owner"], lease_seconds=spec["lease_seconds"], limit=spec["limit"]
    )
    finished = claims[: spec["succeed_first"]]
    for claim in finished:
        store.succeed(claim, {"by": spec["owner"]})
    _write_atomically(
        Path(spec["report"]),
        {
            "claimed": [claim.record_id for claim in claims],
            "succeeded": [claim.record_id for claim in finished],
            "lease_expires_at": min(claim.lease_expires_at for claim in claims),
        },
    )
    time.sleep(600)


def _fail_all(store: CheckpointStore, spec: dict[str, Any]) -> None:
    for claim in store.claim(spec["scope"], spec["owner"], lease_seconds=60):
        store.fail(claim, f"planned failure in {spec['owner']}", retry_in_seconds=0)


def _drain(store: CheckpointStore, spec: dict[str, Any]) -> None:
    go_file = Path(spec["go_file"])
    Path(spec["ready_file"]).touch()
    # The other workers may take minutes to start on a loaded machine; this only ends a
    # worker whose test is gone.
    deadline = time.monotonic() + 600
    while not go_file.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{spec['owner']}: no start signal at {go_file}")
        time.sleep(0.005)
    scope, owner = spec["scope"], spec["owner"]
    with Path(spec["log"]).open("a", encoding="utf-8") as log:
        while True:
            claims = store.claim(scope, owner, lease_seconds=60, limit=spec["batch"])
            if not claims:
                counts = store.counts(scope)
                if not any(counts[status] for status in UNFINISHED):
                    return
                time.sleep(0.005)
                continue
            for claim in claims:
                log.write(f"claim {claim.record_id} {claim.attempts}\n")
                time.sleep(spec["work_seconds"])  # the side effect itself, outside any transaction
                if planned_failure(claim.record_id) and claim.attempts == 1:
                    store.fail(claim, "planned first-attempt failure", retry_in_seconds=0)
                else:
                    store.succeed(claim, {"by": owner})
                    log.write(f"succeed {claim.record_id} {claim.attempts}\n")
                log.flush()


MODES = {"hold": _hold, "fail_all": _fail_all, "drain": _drain}


def main(argv: list[str]) -> None:
    """Run one worker as described by the JSON spec in argv[1]."""
    spec = json.loads(argv[1])
    with open_store(spec["url"]) as store:
        MODES[spec["mode"]](store, spec)


if __name__ == "__main__":
    main(sys.argv)
