"""One daily run of the lake assets in a process that cannot write files past a size.

``python -m idem_assets_tests.reliability.disk_child ROOT STATE_URL DAY LIMIT_BYTES``
materializes the daily lake assets of DAY for the project at ROOT (landing/, lake/) with
``RLIMIT_FSIZE`` set to LIMIT_BYTES (0: no limit): a write that would grow a file past it
fails with EFBIG ("File too large"), as on a full disk. It prints one JSON line: whether
the run succeeded and the failed steps' error messages.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

import dagster as dg

from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.harness import Project


def main(root: str, state_url: str, day: str, limit: int) -> None:
    """Run the day under the file-size limit and report."""
    project = Project(
        root=Path(root),
        lake=LakeResource(landing_dir=f"{root}/landing", lake_dir=f"{root}/lake"),
        checkpoint=CheckpointResource(url=state_url),
        instance=dg.DagsterInstance.ephemeral(),
    )
    definitions = project.definitions()  # imported before the limit: only writes are hit
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    job = definitions.resolve_job_def("daily_lake_job")
    result = job.execute_in_process(
        partition_key=day,
        instance=project.instance,
        asset_selection=[dg.AssetKey("orders")],
        raise_on_error=False,
    )
    errors = [
        _message(event.event_specific_data.error)  # type: ignore[union-attr]
        for event in result.all_events
        if event.event_type_value == "STEP_FAILURE"
    ]
    print(json.dumps({"success": result.success, "errors": errors}))


def _message(error: object) -> str:
    """The error and its causes, innermost last."""
    parts = []
    while error is not None:
        parts.append(str(getattr(error, "message", error)).strip())
        error = getattr(error, "cause", None)
    return " <- ".join(parts)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
