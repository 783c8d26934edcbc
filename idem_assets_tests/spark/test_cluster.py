"""The Spark engine on a real standalone cluster: a master and two workers, separate JVMs.

Runs go through Dagster in a child process (one SparkContext per process) on
``spark://127.0.0.1:<port>``: executors in the workers read the landing zone from a bucket
with the library's own reader and stage Parquet on a path every worker sees; the driver
commits through delta-rs. The tables equal the local engine's, a rerun commits nothing,
and neither a worker SIGKILLed mid-job, a Python worker that dies, nor a task that fails
once changes a row or commits twice.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.faults import CRASH_ENV, CRASH_ONCE_ENV, DELAY_ENV, FAIL_ENV, FAIL_ONCE_ENV
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.generator import generate
from idem_assets.sample.tpch import lay_out_tpch
from idem_assets_tests.fixtures.s3 import S3Bucket
from idem_assets_tests.fixtures.spark_cluster import SparkCluster
from idem_assets_tests.harness import START, Project, day_keys
from idem_assets_tests.reliability.world import ChildOutcome, spawn_runs

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SHOP = ("orders", "events")
TPCH = ("tpch_orders", "tpch_lineitem")
DAYS = day_keys(3)
TPCH_RANGE = ["1992-01-01", "1992-01-06"]
PREFIX = "landing"


def _spark_config(assets) -> dict:
    return {"ops": {name: {"config": {"engine": "spark"}} for name in assets}}


def _landing(root: Path) -> Path:
    landing = root / "landing"
    generate(landing, START, len(DAYS), seed=7)
    lay_out_tpch(landing, 0.01, 6)
    return landing


def _project(root: Path, landing: str, **lake: object) -> Project:
    return Project(
        root=root,
        lake=LakeResource(landing_dir=landing, lake_dir=str(root / "lake"), **lake),
        checkpoint=CheckpointResource(url=f"sqlite:///{root / 'state' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )


@pytest.fixture
def world(tmp_path: Path, s3_bucket: S3Bucket):
    """The landing files in a bucket, a clean local-engine load of them, a cluster project."""
    landing = _landing(tmp_path / "files")
    s3_bucket.upload_tree(landing, PREFIX)
    clean = _project(tmp_path / "clean", str(landing))
    assert clean.run_days(DAYS[0], DAYS[-1], assets=SHOP).success
    job = clean.definitions().resolve_implicit_job_def_def_for_assets(
        [dg.AssetKey(a) for a in TPCH]
    )
    assert job.execute_in_process(
        instance=clean.instance,
        tags={
            "dagster/asset_partition_range_start": TPCH_RANGE[0],
            "dagster/asset_partition_range_end": TPCH_RANGE[1],
        },
        asset_selection=[dg.AssetKey(a) for a in TPCH],
    ).success
    cluster = _project(
        tmp_path / "cluster", s3_bucket.uri(PREFIX), storage_options={"allow_http": "true"}
    )
    return clean, cluster


def _run(
    project: Project,
    cluster: SparkCluster,
    work: Path,
    assets,
    runs,
    env: dict[str, str] | None = None,
    job: str | None = "daily_lake_job",
    on_start=None,
) -> ChildOutcome:
    child = spawn_runs(
        project,
        work,
        job,
        runs,
        assets=list(assets),
        run_config=_spark_config(assets),
        spark={"master": cluster.master_url, "conf": cluster.spark_conf(**(env or {}))},
        storage_options={"allow_http": "true"},
        s3_from_env=True,
        env=env,
    )
    if on_start is not None:
        on_start(child)
    return child.wait(timeout=600)


def _commits(project: Project, table: str) -> int:
    return len(project.lake.table(table).open().history())


def _same(project: Project, clean: Project, tables) -> None:
    for table in tables:
        assert project.table_fingerprint(table) == clean.table_fingerprint(table), table


def test_the_cluster_writes_what_the_local_engine_writes_and_a_rerun_commits_nothing(
    world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    first = _run(project, two_workers, tmp_path / "w", SHOP, [[DAYS[0], DAYS[-1]]])
    assert first.returncode == 0 and first.runs[0]["success"], first.tail()
    written = first.runs[0]["assets"]
    assert {written[a]["engine"] for a in SHOP} == {"spark"}
    assert all(first.runs[0]["checks"].values()), first.runs[0]["checks"]
    tpch = _run(project, two_workers, tmp_path / "w", TPCH, [TPCH_RANGE], job=None)
    assert tpch.returncode == 0 and tpch.runs[0]["success"], tpch.tail()
    _same(project, clean, (*SHOP, *TPCH))
    versions = {t: project.version(t) for t in (*SHOP, *TPCH)}

    again = _run(project, two_workers, tmp_path / "w", SHOP, [[DAYS[0], DAYS[-1]]])
    assert again.runs[0]["success"], again.tail()
    assert {again.runs[0]["assets"][a]["committed"] for a in SHOP} == {False}
    assert {t: project.version(t) for t in (*SHOP, *TPCH)} == versions


def test_a_worker_killed_mid_job_is_rescheduled_and_nothing_commits_twice(
    world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    # Each file read takes 400 ms on the executors, so the job is still reading when one
    # worker (and its executor and Python workers) is SIGKILLed.
    env = {DELAY_ENV: "spark.read_file:400"}
    killed = []

    def kill_one_worker_once_the_job_runs(child) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and child.process.poll() is None:
            apps = two_workers.active_apps()
            if apps and apps[0].get("cores", 0) >= 2:  # executors on both workers
                time.sleep(3)
                two_workers.kill_worker(two_workers.workers[-1])
                killed.append(time.monotonic())
                return
            time.sleep(0.2)

    outcome = _run(
        project,
        two_workers,
        tmp_path / "w",
        SHOP,
        [[DAYS[0], DAYS[-1]]],
        env=env,
        on_start=kill_one_worker_once_the_job_runs,
    )
    assert killed, "the job ended before a worker could be killed"
    assert two_workers.alive_workers() == 1
    assert outcome.returncode == 0 and outcome.runs[0]["success"], outcome.tail()
    _same(project, clean, SHOP)
    assert {t: _commits(project, t) for t in SHOP} == {t: 1 for t in SHOP}


@pytest.mark.parametrize("fault", ["python worker dies", "task fails once"])
def test_a_failed_task_attempt_is_retried_into_a_clean_load(
    fault: str, world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    marker = str(tmp_path / "fired")
    env = (
        {CRASH_ENV: "spark.read_file:2", CRASH_ONCE_ENV: marker}
        if fault == "python worker dies"
        else {FAIL_ENV: "spark.read_file:1", FAIL_ONCE_ENV: marker}
    )
    outcome = _run(project, two_workers, tmp_path / "w", SHOP, [[DAYS[0], DAYS[-1]]], env=env)
    assert Path(marker).exists(), "the fault never fired"
    assert outcome.returncode == 0 and outcome.runs[0]["success"], outcome.tail()
    _same(project, clean, SHOP)
    assert {t: _commits(project, t) for t in SHOP} == {t: 1 for t in SHOP}
