"""engine: spark through the real code location: same tables as the local engine.

The rerun_equality checks recompute with the LOCAL engine, so a passing check on a
Spark-written table is itself the cross-engine proof.
"""

import dagster as dg
import pytest

from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.tpch import lay_out_tpch
from idem_assets_tests.harness import (
    START,
    Project,
    check_results,
    materialization_metadata,
    new_project,
)

pytestmark = pytest.mark.spark
SPARK = {"ops": {name: {"config": {"engine": "spark"}} for name in ("orders", "events")}}


def _run(project, first, last=None, run_config=None):
    return project.run_days(first, last, assets=["orders", "events"], run_config=run_config)


def test_spark_runs_write_what_local_runs_write(tmp_path, spark):
    local = new_project(tmp_path / "local", days=3)
    on_spark = new_project(tmp_path / "spark", days=3)
    keys = [START.replace(day=d).isoformat() for d in (1, 2, 3)]
    assert _run(local, keys[0], keys[-1]).success
    result = _run(on_spark, keys[0], keys[-1], run_config=SPARK)
    assert result.success, result.all_events
    md = materialization_metadata(result)
    assert md["orders"]["engine"] == "spark" and md["events"]["engine"] == "spark"
    checks = check_results(result)
    assert checks and all(checks.values()), checks
    for table in ("orders", "events"):
        assert on_spark.table_fingerprint(table) == local.table_fingerprint(table), table

    # The Spark reader cannot number CSV/JSON Lines rows (0 = unknown); the same rows of
    # the same files are quarantined.
    def quarantined(project):
        return sorted((r["source"], r["source_file"]) for r in project.table_rows("quarantine"))

    assert quarantined(on_spark) == quarantined(local) != []


def test_spark_rerun_commits_nothing(tmp_path, spark):
    project = new_project(tmp_path, days=2)
    key = START.isoformat()
    assert _run(project, key, run_config=SPARK).success
    versions = {t: project.version(t) for t in ("orders", "events")}
    again = _run(project, key, run_config=SPARK)
    assert again.success
    assert {t: project.version(t) for t in ("orders", "events")} == versions
    md = materialization_metadata(again)
    assert md["orders"]["committed"] is False


TPCH_DAILY = ("tpch_orders", "tpch_lineitem")


def _tpch_run(project, run_config=None):
    job = project.definitions().resolve_implicit_job_def_def_for_assets(
        [dg.AssetKey(a) for a in TPCH_DAILY]
    )
    tags = {
        "dagster/asset_partition_range_start": "1992-01-01",
        "dagster/asset_partition_range_end": "1992-01-10",
    }
    return job.execute_in_process(
        tags=tags,
        instance=project.instance,
        raise_on_error=False,
        run_config=run_config,
        asset_selection=[dg.AssetKey(a) for a in TPCH_DAILY],
    )


def test_a_yaml_declared_domain_on_spark_equals_the_local_engine(tmp_path, spark):
    """TPC-H (Parquet by day, gzip CSV in year/month/day folders, no version column)."""
    projects = {}
    for engine in ("local", "spark"):
        landing = tmp_path / engine / "landing"
        lay_out_tpch(landing, 0.01, 10)
        projects[engine] = Project(
            root=tmp_path / engine,
            instance=dg.DagsterInstance.ephemeral(),
            lake=LakeResource(landing_dir=str(landing), lake_dir=str(tmp_path / engine / "lake")),
            checkpoint=CheckpointResource(url=f"sqlite:///{tmp_path / engine / 'state.db'}"),
        )
    config = {"ops": {name: {"config": {"engine": "spark"}} for name in TPCH_DAILY}}
    assert _tpch_run(projects["local"]).success
    result = _tpch_run(projects["spark"], config)
    assert result.success, result.all_events
    md = materialization_metadata(result)
    assert {md[a]["engine"] for a in TPCH_DAILY} == {"spark"}
    checks = check_results(result)
    assert checks and all(checks.values()), checks
    for table in TPCH_DAILY:
        assert projects["spark"].table_fingerprint(table) == projects["local"].table_fingerprint(
            table
        ), table
    again = _tpch_run(projects["spark"], config)
    assert {materialization_metadata(again)[a]["committed"] for a in TPCH_DAILY} == {False}
