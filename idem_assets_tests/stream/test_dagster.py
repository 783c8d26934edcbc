"""The Dagster side: the events_stream asset, its job, its sensor and their metadata."""

from __future__ import annotations

import dagster as dg
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake

from idem_assets.defs.stream.assets import events_stream
from idem_assets.defs.stream.checks import EXACTLY_ONCE_CHECK, STREAM_CHECKS
from idem_assets.defs.stream.jobs import events_stream_job
from idem_assets.defs.stream.sensors import events_stream_sensor
from idem_assets.lake import read_rows
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import OffsetLog
from idem_assets_tests.harness import check_results, materialization_metadata
from idem_assets_tests.stream.world import StreamWorld, expected_keys


def _resources(world: StreamWorld) -> dict[str, object]:
    lake = LakeResource(landing_dir=str(world.landing), lake_dir=str(world.lake))
    return {"lake": lake, "checkpoint": CheckpointResource(url=world.url)}


def _definitions(world: StreamWorld) -> dg.Definitions:
    return dg.Definitions(
        assets=[events_stream],
        asset_checks=STREAM_CHECKS,
        jobs=[events_stream_job],
        sensors=[events_stream_sensor],
        resources=_resources(world),
    )


def _run(
    world: StreamWorld, instance: dg.DagsterInstance, **config: object
) -> dg.ExecuteInProcessResult:
    job = _definitions(world).resolve_job_def(events_stream_job.name)
    run_config = {"ops": {"events_stream": {"config": config}}}
    return job.execute_in_process(run_config=run_config, instance=instance, raise_on_error=False)


def _tick(world: StreamWorld, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    context = dg.build_sensor_context(cursor=cursor, resources=_resources(world))
    result = events_stream_sensor(context)
    return list(result.run_requests or []), result.cursor


def test_definitions_load(sqlite_world: StreamWorld) -> None:
    defs = _definitions(sqlite_world)
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("events_stream_job").asset_layer.selected_asset_keys == {
        dg.AssetKey("events_stream")
    }


def test_asset_runs_commit_batches_and_report_them(world: StreamWorld) -> None:
    files = world.append(5)
    instance = dg.DagsterInstance.ephemeral()
    first = _run(world, instance, max_files_per_batch=2, max_batches_per_run=2)
    assert first.success
    meta = materialization_metadata(first)["events_stream"]
    assert (meta["batches_committed"], meta["files"], meta["txn_version"], meta["stopped"]) == (
        2,
        4,
        1,
        "max_batches",
    )
    results = {t.payload["seq"]: t.result for t in world.trackers()}
    assert [b["fingerprint"] for b in meta["batches"]] == [
        results[0]["fingerprint"],
        results[1]["fingerprint"],
    ]
    assert meta["rows_appended"] == results[0]["rows"] + results[1]["rows"]
    second = materialization_metadata(_run(world, instance, max_files_per_batch=2))
    assert (second["events_stream"]["batches_committed"], second["events_stream"]["stopped"]) == (
        1,
        "drained",
    )
    idle = materialization_metadata(_run(world, instance))["events_stream"]
    assert (idle["batches_committed"], idle["rows_appended"], idle["txn_version"]) == (0, 0, 2)
    assert sorted(world.keys()) == sorted(expected_keys(files))


def test_a_changed_file_fails_the_run_naming_it(sqlite_world: StreamWorld) -> None:
    world = sqlite_world
    files = world.append(2)
    with world.store() as store:
        OffsetLog(store, EVENTS_STREAM).head_or_plan(world.landing, 20, 5)
    files[0].path.write_bytes(b'{"event_id": "rewritten"}\n')
    result = _run(world, dg.DagsterInstance.ephemeral())
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.to_string()  # type: ignore[union-attr]
    assert "events_stream/events-000000.jsonl: changed after it was assigned to batch 0" in message
    assert not world.table.exists()


def test_sensor_requests_once_per_set_of_new_files(sqlite_world: StreamWorld) -> None:
    world = sqlite_world
    requests, cursor = _tick(world, None)
    assert requests == []
    world.append(2)
    requests, cursor = _tick(world, cursor)
    assert len(requests) == 1 and requests[0].run_key.startswith("events_stream:files-")
    first_key = requests[0].run_key
    again, cursor = _tick(world, cursor)
    assert again == []  # the same files never trigger twice
    world.append(1)
    requests, cursor = _tick(world, cursor)
    assert len(requests) == 1 and requests[0].run_key not in (first_key, None)
    assert _run(world, dg.DagsterInstance.ephemeral()).success
    done, _ = _tick(world, cursor)
    assert done == []


@pytest.mark.parametrize("retry_delay", [0.0, 3600.0])
def test_sensor_retries_a_failed_batch_once_it_is_due(
    sqlite_world: StreamWorld, retry_delay: float
) -> None:
    world = sqlite_world
    files = world.append(3)
    files[2].path.write_bytes(b"PAR1 not parquet")  # events-000002.parquet
    result = _run(world, dg.DagsterInstance.ephemeral(), retry_delay_seconds=retry_delay)
    assert not result.success
    requests, _ = _tick(world, None)
    if retry_delay:
        assert requests == []  # not due yet: no run that would only fail again
    else:
        assert [r.run_key for r in requests] == ["events_stream:batch-0:attempt-1"]


def test_exactly_once_check_passes_and_catches_a_replayed_batch(sqlite_world: StreamWorld) -> None:
    world = sqlite_world
    world.append(4)
    instance = dg.DagsterInstance.ephemeral()
    result = _run(world, instance, max_files_per_batch=2)
    assert check_results(result) == {("events_stream", EXACTLY_ONCE_CHECK): True}
    # A writer that skips the txn protocol appends batch 1 again: the check names it.
    table = world.table.open()
    stored = read_rows(table)
    again = stored.filter(pc.equal(stored.column("stream_batch"), 1))
    write_deltalake(table, again, mode="append")
    rerun = _run(world, instance)
    evaluation = rerun.get_asset_check_evaluations()[0]
    assert not evaluation.passed
    problems = evaluation.metadata["problems"].value
    assert problems == [
        f"batch 1: {2 * again.num_rows} rows in the table, {again.num_rows} committed"
    ]
