"""The maintenance job over the code location's lake: files change, content and no-ops stay."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from idem_assets.lake import fingerprint, read_rows
from idem_assets.sample.stream_files import append_stream_files
from idem_assets_tests.harness import check_results, materialization_metadata, new_project

TABLES = ("orders", "customers", "events", "daily_sales", "events_stream", "quarantine")
STREAM = {"ops": {"events_stream": {"config": {"max_files_per_batch": 1}}}}


def _state(project) -> dict[str, tuple[int, str]]:
    out = {}
    for name in TABLES:
        table = project.lake.table(name).open()
        if table is not None:
            out[name] = (table.version(), str(fingerprint(read_rows(table))))
    return out


def _observations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {
        event.asset_key.to_user_string(): {
            key: value.value
            for key, value in event.event_specific_data.asset_observation.metadata.items()
        }
        for event in result.all_events
        if event.event_type_value == "ASSET_OBSERVATION"
    }


@pytest.fixture(scope="module")
def maintained(tmp_path_factory):
    """Two days loaded, four stream runs (a file each), then one maintenance run."""
    project = new_project(tmp_path_factory.mktemp("maintenance"), days=2)
    assert project.run_days("2024-03-01").success and project.run_days("2024-03-02").success
    for seed in range(4):
        append_stream_files(project.landing, 1, 30, seed)
        assert project.run_job("events_stream_job", run_config=STREAM).success
    before = _state(project)
    result = project.run_job("lake_maintenance_job")
    return project, before, result


def test_maintenance_compacts_the_appended_table_and_observes_every_asset(maintained):
    project, before, result = maintained
    assert result.success
    seen = _observations(result)
    assert set(seen) == {"orders", "customers", "events", "daily_sales", "events_stream"}
    stream = seen["events_stream"]
    assert stream["compacted"] is True and stream["files_removed"] >= 4
    assert stream["retention_hours"] == 168 and stream["vacuumed_files"] == 0
    assert stream["delta_version"] == before["events_stream"][0] + 1
    # One file per partition everywhere else: nothing rewritten, nothing committed.
    for name in ("orders", "customers", "events", "daily_sales"):
        assert seen[name]["compacted"] is False, name
        assert seen[name]["delta_version"] == before[name][0], name
    assert seen["events"]["z_order"] == "customer_id"
    log = Path(project.lake.table("events_stream").uri) / "_delta_log"
    assert list(log.glob("*.checkpoint.parquet"))


def test_maintenance_changes_no_content(maintained):
    project, before, _ = maintained
    after = _state(project)
    assert {name: fp for name, (_, fp) in after.items()} == {
        name: fp for name, (_, fp) in before.items()
    }


def test_reruns_after_maintenance_commit_nothing_and_every_check_passes(maintained):
    project, _, _ = maintained
    versions = {name: version for name, (version, _) in _state(project).items()}
    rerun = project.run_days("2024-03-01")
    assert rerun.success
    metadata = materialization_metadata(rerun)
    assert {metadata[a]["committed"] for a in ("orders", "customers", "events")} == {False}
    checks = check_results(rerun)
    assert ("orders", "rerun_equality") in checks and all(checks.values()), checks
    assert project.run_job("events_stream_job", run_config=STREAM).success
    assert {name: version for name, (version, _) in _state(project).items()} == versions


def test_a_short_retention_is_refused_before_anything_runs(maintained):
    project, _, _ = maintained
    before = _state(project)
    config = {"ops": {"maintain_lake_tables": {"config": {"retention_hours": 24}}}}
    result = project.run_job("lake_maintenance_job", run_config=config)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "retention_hours" in str(failure.event_specific_data)
    assert "greater than or equal to 168" in str(failure.event_specific_data)
    assert _state(project) == before


def test_an_unknown_table_fails_the_run_by_name(maintained):
    project, _, _ = maintained
    config = {"ops": {"maintain_lake_tables": {"config": {"tables": ["orders", "refunds"]}}}}
    result = project.run_job("lake_maintenance_job", run_config=config)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "not lake tables of this code location: refunds" in str(failure.event_specific_data)


def test_the_schedule_runs_the_job_nightly_and_starts_stopped(maintained):
    project, _, _ = maintained
    schedule = project.definitions().resolve_schedule_def("lake_maintenance_schedule")
    assert schedule.job_name == "lake_maintenance_job"
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("30 4 * * *", "UTC")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
