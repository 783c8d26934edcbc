"""Delta tables on S3-compatible storage (moto server on loopback): reruns and races."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from dagster_deltalake import S3Config
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from idem_assets.lake import Commit, LakeTable, fingerprint, overwrite_partitions, read_rows
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.generator import generate
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.fixtures.s3 import S3Bucket
from idem_assets_tests.harness import (
    START,
    Project,
    check_results,
    day_keys,
    materialization_metadata,
)
from idem_assets_tests.lake.rows import order, orders_table
from idem_assets_tests.processes import race

pytestmark = pytest.mark.slow

TABLES = ("orders", "customers", "daily_sales")
# Where the resource takes its S3 settings from in the dg.EnvVar test (not AWS_*).
RESOURCE_ENV = {
    "access_key_id": "IDEM_S3_ACCESS_KEY_ID",
    "secret_access_key": "IDEM_S3_SECRET_ACCESS_KEY",
    "endpoint": "IDEM_S3_ENDPOINT",
    "region": "IDEM_S3_REGION",
}


def _resource_env(bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """Move the settings from AWS_* to the resource's own variables."""
    source = {
        "access_key_id": "AWS_ACCESS_KEY_ID",
        "secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "endpoint": "AWS_ENDPOINT_URL",
        "region": "AWS_REGION",
    }
    for field, name in RESOURCE_ENV.items():
        monkeypatch.setenv(name, bucket.credentials[source[field]])
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)


def _s3_lake(landing: Path, bucket: S3Bucket) -> LakeResource:
    """The lake on the bucket, credentials only through dg.EnvVar."""
    return LakeResource(
        landing_dir=str(landing),
        lake_dir=f"s3://{bucket.name}/lake",
        s3=S3Config(**{field: dg.EnvVar(name) for field, name in RESOURCE_ENV.items()}),
        storage_options={"allow_http": "true"},  # the local server speaks plain HTTP
    )


def test_assets_on_s3_rerun_without_new_versions(s3_bucket, tmp_path, monkeypatch):
    _resource_env(s3_bucket, monkeypatch)
    generate(tmp_path / "landing", START, 3, seed=7)
    project = Project(
        root=tmp_path,
        lake=_s3_lake(tmp_path / "landing", s3_bucket),
        checkpoint=CheckpointResource(url=f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )
    days = day_keys(3)
    backfill = project.run_days(days[0], days[-1], assets=TABLES)
    assert backfill.success
    assert all(check_results(backfill).values()), check_results(backfill)
    versions = {table: project.version(table) for table in TABLES}
    fingerprints = {table: project.table_fingerprint(table) for table in TABLES}
    assert fingerprints["orders"].rows > 0 and fingerprints["customers"].rows > 0

    for day in days:  # per-day reruns of what one backfill run wrote
        rerun = project.run_days(day, assets=TABLES)
        assert rerun.success
        outcomes = check_results(rerun)
        assert outcomes and all(outcomes.values()), outcomes
        written = materialization_metadata(rerun)
        assert {written[table]["committed"] for table in TABLES} == {False}
    assert {table: project.version(table) for table in TABLES} == versions
    assert {table: project.table_fingerprint(table) for table in TABLES} == fingerprints

    # The tables really are in the bucket, one log entry per version, nothing on local disk.
    for table in TABLES:
        log = [key for key in s3_bucket.keys(f"lake/{table}/_delta_log/") if key.endswith(".json")]
        assert len(log) == versions[table] + 1, log
    assert not (tmp_path / "lake").exists()


def test_the_code_location_reaches_s3_from_the_environment_alone(s3_bucket, tmp_path, monkeypatch):
    # What an operator sets: IDEM_LAKE_DIR and the standard AWS_* variables; no code.
    monkeypatch.setenv("IDEM_LAKE_DIR", f"s3://{s3_bucket.name}/lake")
    generate(tmp_path / "landing", START, 1, seed=7)
    project = Project(
        root=tmp_path,
        lake=LakeResource(landing_dir=str(tmp_path / "landing")),
        checkpoint=CheckpointResource(url=f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert project.lake.resolved_storage_options() == {}
    result = project.run_days(day_keys(1)[0], assets=["orders"])
    assert result.success and all(check_results(result).values())
    rows = materialization_metadata(result)["orders"]["dagster/row_count"]
    assert rows > 0 and project.table_fingerprint("orders").rows == rows
    assert s3_bucket.keys("lake/orders/_delta_log/")


def _orders_of(day: str, first_id: int, n: int = 50) -> pa.Table:
    return orders_table([order(first_id + i, day, amount=f"{i}.50") for i in range(n)])


def _overwrite_day(uri: str, day: str, first_id: int, barrier) -> tuple[int, bool]:
    """In a fresh process: wait for the other writer, then replace one day of orders."""
    barrier.wait()
    start = dt.date.fromisoformat(day)
    result = overwrite_partitions(
        LakeTable(uri),
        _orders_of(day, first_id),
        "order_date",
        start,
        start + dt.timedelta(days=1),
        schema=ORDERS.schema,
        commit=Commit({"writer": day}),
    )
    return result.version, result.committed


def _race(jobs: list[tuple[str, str, int]]) -> list[tuple[int, bool]]:
    """Run overwrites in separate processes, released together by a barrier."""
    return race(_overwrite_day, jobs)  # children inherit the AWS_* environment


def test_two_concurrent_commits_to_one_s3_table_both_land(s3_bucket):
    uri = f"s3://{s3_bucket.name}/lake/orders"
    seed = overwrite_partitions(
        LakeTable(uri),
        _orders_of("2024-03-01", 0),
        "order_date",
        dt.date(2024, 3, 1),
        dt.date(2024, 3, 2),
        schema=ORDERS.schema,
    )
    assert seed.version == 0

    outcomes = _race([(uri, "2024-03-02", 1000), (uri, "2024-03-03", 2000)])
    assert all(committed for _, committed in outcomes)
    assert sorted(version for version, _ in outcomes) == [1, 2]
    table = DeltaTable(uri)
    assert table.version() == 2
    expected = pa.concat_tables(
        [
            _orders_of("2024-03-01", 0),
            _orders_of("2024-03-02", 1000),
            _orders_of("2024-03-03", 2000),
        ]
    )
    assert fingerprint(read_rows(table)) == fingerprint(expected)
    # Both commits are in the log, each once.
    writers = [entry.get("writer") for entry in sorted(table.history(), key=lambda e: e["version"])]
    assert writers[0] is None and sorted(writers[1:]) == ["2024-03-02", "2024-03-03"]


def test_concurrent_identical_commits_to_one_s3_day_leave_one_clean_write(s3_bucket):
    uri = f"s3://{s3_bucket.name}/lake/orders"
    outcomes = _race([(uri, "2024-03-02", 1000), (uri, "2024-03-02", 1000)])
    # The loser re-reads the table, finds its content already there and commits nothing
    # (or, if it lost the race to create the table, replaces the day with the same rows).
    assert 1 <= sum(committed for _, committed in outcomes) <= 2
    stored = read_rows(DeltaTable(uri))
    assert fingerprint(stored) == fingerprint(_orders_of("2024-03-02", 1000))


def test_the_server_rejects_a_commit_that_lost_the_race(s3_bucket):
    """delta-rs 1.x commits with a conditional PUT (If-None-Match: *), no lock table."""
    uri = f"s3://{s3_bucket.name}/lake/race"
    write_deltalake(uri, pa.table({"x": [0]}))
    winner, loser = DeltaTable(uri), DeltaTable(uri)  # both at version 0
    no_rebase = CommitProperties(max_commit_retries=0)
    write_deltalake(winner, pa.table({"x": [1]}), mode="append", commit_properties=no_rebase)
    with pytest.raises(CommitFailedError):
        write_deltalake(loser, pa.table({"x": [2]}), mode="append", commit_properties=no_rebase)
    table = DeltaTable(uri)
    assert table.version() == 1
    assert sorted(read_rows(table).column("x").to_pylist()) == [0, 1]
