"""A materialization run in its own OS process, for the crash and concurrency suites.

``python -m idem_assets_tests.reliability.runner '<json spec>'`` builds the real code
location with resources pointing at the spec's landing, lake and checkpoint store, and
executes one job per entry of ``runs`` (a partition key, or ``[first, last]`` for a
single-run backfill of a range), one after the other. ``IDEM_CRASH_AT`` in the
environment arms a crash point (``idem_assets.faults``); the notification token comes
from ``IDEM_NOTIFY_TOKEN``, never from the command line. With ``go_file`` the process
imports everything, touches ``ready_file`` and waits for ``go_file`` before its first
run, so that several processes start their runs together. The outcome of every run is
written as JSON to ``result``. With ``"instance": "home"`` the runs use the instance of
``$DAGSTER_HOME`` (e.g. the PostgreSQL profile) instead of an ephemeral one. ``spark``
(``master``, ``conf``) configures the Spark engine's session; ``storage_options`` and
``s3_from_env`` the lake resource's object-store settings (for a landing zone or lake in a
bucket); no ``job``: the implicit job of ``assets`` (``without_checks``: those assets
alone, none of their checks). With ``clock_ahead`` (seconds) the checkpoint store's clock
runs that far ahead of the database's: a rerun past a dead run's leases, not waiting.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_deltalake import S3Config

from idem_assets.definitions import build_definitions
from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.lib.asset_def import LAKE_IO_MANAGER_KEY
from idem_assets.notify import NOTIFY_TOKEN_ENV
from idem_assets.resources import (
    CheckpointResource,
    LakeResource,
    NotificationResource,
    SparkResource,
)
from idem_assets_tests.harness import (
    AheadCheckpoint,
    check_results,
    materialization_metadata,
    warnings,
)

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def definitions(spec: dict[str, Any]) -> dg.Definitions:
    """The code location wired to the spec's directories and store."""
    # "s3_from_env": the object-store settings as dg.EnvVar of the standard AWS_* names, so
    # that they reach Spark executors with the landing root (their own environment has none).
    s3 = (
        S3Config(
            access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
            secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
            endpoint=dg.EnvVar("AWS_ENDPOINT_URL"),
            region=dg.EnvVar("AWS_REGION"),
        )
        if spec.get("s3_from_env")
        else None
    )
    lake = LakeResource(
        landing_dir=spec["landing"],
        lake_dir=spec["lake"],
        s3=s3,
        storage_options=spec.get("storage_options", {}),
    )
    checkpoint = (
        AheadCheckpoint(url=spec["state_url"], clock_ahead=spec["clock_ahead"])
        if "clock_ahead" in spec
        else CheckpointResource(url=spec["state_url"])
    )
    notifier = NotificationResource(
        base_url=spec.get("notify_url", "http://127.0.0.1:9"),
        token=dg.EnvVar(NOTIFY_TOKEN_ENV),
        max_retries=1,
        backoff_seconds=0.01,
    )
    io_manager = IdempotentDeltaIOManager(
        lake=lake,
        checkpoint=checkpoint,
        write_lease_seconds=float(spec.get("write_lease_seconds", 60.0)),
    )
    return build_definitions(
        {
            "lake": lake,
            "checkpoint": checkpoint,
            "notifier": notifier,
            "spark": SparkResource(**spec.get("spark", {})),
            LAKE_IO_MANAGER_KEY: io_manager,
        }
    )


def failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """Every failed step's error with its causes, as a user sees it (empty on success)."""
    messages = []
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        error, chain = event.step_failure_data.error, []
        while error is not None:
            chain.append(error.message.strip())
            error = error.cause
        messages.append(f"{event.step_key}: " + " <- ".join(chain))
    return messages


def execute(
    defs: dg.Definitions,
    spec: dict[str, Any],
    run: str | list[str] | dict[str, Any],
    run_id: str | None,
) -> dict[str, Any]:
    """Execute the spec's job for one partition or one range; summarise the outcome.

    A run given as a mapping (``{"run": ..., "job": ..., "assets": [...], "run_config":
    ...}``) overrides the spec's job, assets and run config for itself.
    """
    if isinstance(run, dict):
        spec = {**spec, **{k: v for k, v in run.items() if k != "run"}}
        run = run["run"]
    selection = [dg.AssetKey(a) for a in spec["assets"]] if spec.get("assets") else None
    # No job named: the implicit job of the selected assets (e.g. another partitioning);
    # "without_checks": the selected assets alone, none of their checks.
    if spec.get("without_checks"):
        alone = dg.define_asset_job(
            "assets_without_checks",
            selection=dg.AssetSelection.assets(*(selection or [])).without_checks(),
        )
        job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def(alone.name)
        selection = None
    else:
        job = (
            defs.resolve_job_def(spec["job"])
            if spec.get("job")
            else defs.resolve_implicit_job_def_def_for_assets(selection or [])
        )
    kwargs: dict[str, Any] = (
        {"partition_key": run}
        if isinstance(run, str)
        else {"tags": {RANGE_START_TAG: run[0], RANGE_END_TAG: run[1]}}
    )
    # "home": the instance DAGSTER_HOME's profile describes (e.g. PostgreSQL storage).
    home = spec.get("instance") == "home"
    instance = dg.DagsterInstance.get() if home else dg.DagsterInstance.ephemeral()
    result = job.execute_in_process(
        instance=instance,
        run_config=spec.get("run_config"),
        asset_selection=selection,
        raise_on_error=False,
        run_id=run_id,
        **kwargs,
    )
    return {
        "run": run,
        "run_id": result.run_id,
        "success": result.success,
        "assets": materialization_metadata(result),
        "checks": {
            f"{asset}:{check}": passed for (asset, check), passed in check_results(result).items()
        },
        "warnings": sorted(f"{asset}:{check}" for asset, check in warnings(result)),
        "errors": failures(result),
    }


def main(spec: dict[str, Any]) -> None:
    """Run the spec's runs in order and write their outcomes to ``spec['result']``."""
    defs = definitions(spec)
    if spec.get("go_file"):
        Path(spec["ready_file"]).touch()
        while not Path(spec["go_file"]).exists():
            time.sleep(0.005)
    run_ids = spec.get("run_ids") or [None] * len(spec["runs"])
    outcomes = [
        execute(defs, spec, run, run_id) for run, run_id in zip(spec["runs"], run_ids, strict=True)
    ]
    partial = Path(f"{spec['result']}.partial")
    partial.write_text(json.dumps({"pid": os.getpid(), "runs": outcomes}, default=str))
    partial.replace(spec["result"])


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
