"""The Spark engine on a real standalone cluster: a master and two workers, separate JVMs.

Runs go through Dagster in a child process (one SparkContext per process) on
``spark://127.0.0.1:<port>``: executors in the workers read the landing zone from a bucket
with the library's own reader and stage Parquet on a path every worker sees; the driver
commits through delta-rs. The tables equal the local engine's, a rerun commits nothing,
and neither a worker SIGKILLed mid-job, a Python worker that dies, nor a task that fails
once changes a row or commits twice.
"""

from __future__ import annotations

import secrets
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.faults import CRASH_ENV, CRASH_ONCE_ENV, DELAY_ENV, FAIL_ENV, FAIL_ONCE_ENV
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.generator import generate
from idem_assets.sample.tpch import lay_out_tpch
from idem_assets_tests.fixtures.s3 import REGION, S3Bucket
from idem_assets_tests.fixtures.spark_cluster import SparkCluster
from idem_assets_tests.harness import START, Project, day_keys
from idem_assets_tests.reliability.world import ChildOutcome, spawn_runs
from idem_assets_tests.waiting import wait_until

# The first test also starts the cluster and builds the reference lake (~90 s on a quiet
# machine): several times that on a loaded one.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]
RUN_SECONDS = 1200

SHOP = ("orders", "events")
TPCH = ("tpch_orders", "tpch_lineitem")
DAYS = day_keys(3)
TPCH_RANGE = ["1992-01-01", "1992-01-06"]
PREFIX = "landing"


def credentials() -> dict[str, str]:
    """Generated credentials for the module's bucket (the local server accepts any)."""
    return {
        "AWS_ACCESS_KEY_ID": f"AKIA{secrets.token_hex(8).upper()}",
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        "AWS_REGION": REGION,
    }


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


@pytest.fixture(scope="module")
def landing_and_clean_load(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str):
    """The landing files in a bucket, and a clean local-engine load of them (once)."""
    root = tmp_path_factory.mktemp("cluster-world")
    landing = _landing(root / "files")
    bucket = S3Bucket(s3_endpoint, f"cluster-{uuid.uuid4().hex[:12]}", credentials())
    bucket.client().create_bucket(Bucket=bucket.name)
    bucket.upload_tree(landing, PREFIX)
    clean = _project(root / "clean", str(landing))
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
    return bucket, clean


@pytest.fixture
def world(landing_and_clean_load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The clean load, and a fresh project whose runs go to the cluster."""
    bucket, clean = landing_and_clean_load
    for name, value in {**bucket.credentials, "AWS_ENDPOINT_URL": bucket.endpoint}.items():
        monkeypatch.setenv(name, value)  # read by the child's dg.EnvVar settings
    cluster = _project(tmp_path / "cluster", bucket.uri(PREFIX))
    return clean, cluster


def _run(
    project: Project,
    cluster: SparkCluster,
    work: Path,
    runs: list,
    env: dict[str, str] | None = None,
    on_start=None,
) -> ChildOutcome:
    """Runs of the shop's daily job (or of the run's own job and assets) on the cluster."""
    child = spawn_runs(
        project,
        work,
        "daily_lake_job",
        runs,
        assets=list(SHOP),
        run_config=_spark_config(SHOP),
        spark={"master": cluster.master_url, "conf": cluster.spark_conf(**(env or {}))},
        storage_options={"allow_http": "true"},
        s3_from_env=True,
        env=env,
    )
    if on_start is not None:
        on_start(child)
    outcome = child.wait(timeout=RUN_SECONDS)
    assert outcome.returncode == 0, outcome.tail()
    return outcome


def _commits(project: Project, table: str) -> int:
    return len(project.lake.table(table).open().history())


def _same(project: Project, clean: Project, tables) -> None:
    for table in tables:
        assert project.table_fingerprint(table) == clean.table_fingerprint(table), table


SHOP_RANGE = [DAYS[0], DAYS[-1]]
TPCH_RUN = {"run": TPCH_RANGE, "job": None, "assets": list(TPCH), "run_config": _spark_config(TPCH)}


def test_the_cluster_writes_what_the_local_engine_writes_and_a_rerun_commits_nothing(
    world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    # One driver process, one application on the cluster: the shop's range, TPC-H's range,
    # then the shop's range again.
    first, tpch, again = _run(
        project, two_workers, tmp_path / "w", [SHOP_RANGE, TPCH_RUN, SHOP_RANGE]
    ).runs
    assert first["success"] and tpch["success"], (first["errors"], tpch["errors"])
    assert {first["assets"][a]["engine"] for a in SHOP} == {"spark"}
    assert {tpch["assets"][a]["engine"] for a in TPCH} == {"spark"}
    assert all(first["checks"].values()) and all(tpch["checks"].values())
    _same(project, clean, (*SHOP, *TPCH))
    assert again["success"], again["errors"]
    assert {again["assets"][a]["committed"] for a in SHOP} == {False}
    assert {t: _commits(project, t) for t in (*SHOP, *TPCH)} == {t: 1 for t in (*SHOP, *TPCH)}


def test_a_worker_killed_mid_job_is_rescheduled_and_nothing_commits_twice(
    world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    # Each file read takes 400 ms on the executors, so the job is still reading when one
    # worker (and its executor and Python workers) is SIGKILLed.
    env = {DELAY_ENV: "spark.read_file:400"}
    killed = []

    def kill_one_worker_once_the_job_runs(child) -> None:
        def on_both_workers_or_ended() -> bool:
            apps = two_workers.active_apps()
            return child.process.poll() is not None or bool(apps and apps[0].get("cores", 0) >= 2)

        wait_until(
            on_both_workers_or_ended,
            "the job's executors on both workers",
            seen=two_workers.active_apps,
            every=0.2,
        )
        if child.process.poll() is None:
            # Into the job's reads before the kill; if load makes it earlier, the kill only
            # comes before the tasks, which are then rescheduled all the same.
            time.sleep(3)
            two_workers.kill_worker(two_workers.workers[-1])
            killed.append(time.monotonic())

    [outcome] = _run(
        project,
        two_workers,
        tmp_path / "w",
        [SHOP_RANGE],
        env=env,
        on_start=kill_one_worker_once_the_job_runs,
    ).runs
    assert killed, "the job ended before a worker could be killed"
    assert two_workers.alive_workers() == 1
    assert outcome["success"], outcome["errors"]
    _same(project, clean, SHOP)
    assert {t: _commits(project, t) for t in SHOP} == {t: 1 for t in SHOP}


def test_a_dead_python_worker_and_a_task_failing_once_are_retried_into_a_clean_load(
    world, two_workers: SparkCluster, tmp_path: Path
):
    clean, project = world
    crashed, failed = tmp_path / "crashed", tmp_path / "failed"
    env = {
        # A Python worker SIGKILLs itself at its second file; a task fails at its first.
        CRASH_ENV: "spark.read_file:2",
        CRASH_ONCE_ENV: str(crashed),
        FAIL_ENV: "spark.read_file:1",
        FAIL_ONCE_ENV: str(failed),
    }
    [outcome] = _run(project, two_workers, tmp_path / "w", [SHOP_RANGE], env=env).runs
    assert crashed.exists() and failed.exists(), "a fault never fired"
    assert outcome["success"], outcome["errors"]
    _same(project, clean, SHOP)
    assert {t: _commits(project, t) for t in SHOP} == {t: 1 for t in SHOP}
