"""The landing zone in a bucket (moto server on loopback), through Dagster.

With the lake on local disk and with both in the bucket: a range run loads exactly what a
local landing zone gives (same input signatures, same table fingerprints), reruns commit
nothing, and a file added or replaced in the bucket changes exactly its day, which the
landing sensor requests without downloading an object. A root that does not exist, a
bucket that does not exist or an endpoint nobody answers fail the run by name with no
table touched; an object replaced while a run reads the day fails that run by name, and
the rerun loads the new bytes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.lib import source_sensor
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample import ORDERS_SOURCE
from idem_assets.sample.generator import generate, write_late_orders
from idem_assets_tests.fixtures.s3 import FaultProxy, S3Bucket
from idem_assets_tests.harness import (
    START,
    Project,
    check_results,
    day_keys,
    materialization_metadata,
)

pytestmark = pytest.mark.slow

TABLES = ("orders", "customers", "events", "daily_sales")
DAYS = day_keys(3)
PREFIX = "exports/landing"
HTTP = {"allow_http": "true"}  # the local server speaks plain HTTP


def _project(root: Path, lake: LakeResource) -> Project:
    return Project(
        root=root,
        lake=lake,
        checkpoint=CheckpointResource(url=f"sqlite:///{root / 'state' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )


def _local_tree(root: Path) -> Path:
    landing = root / "landing"
    generate(landing, START, len(DAYS), seed=7)
    return landing


def _folder_and_bucket(
    tmp_path: Path, s3_bucket: S3Bucket, proxy: FaultProxy
) -> tuple[Path, Project, Project]:
    """One generated tree in a folder and uploaded to the bucket, a project on each (the
    bucket reached through the proxy, which counts and disturbs what is asked of it)."""
    landing = _local_tree(tmp_path)
    s3_bucket.upload_tree(landing, PREFIX)
    folder = _project(
        tmp_path / "folder", LakeResource(landing_dir=str(landing), lake_dir=str(tmp_path / "a"))
    )
    bucket = _project(
        tmp_path / "bucket",
        LakeResource(
            landing_dir=s3_bucket.uri(PREFIX),
            lake_dir=str(tmp_path / "b"),
            storage_options={**HTTP, "endpoint": proxy.endpoint},
        ),
    )
    return landing, folder, bucket


def _state(project: Project) -> dict[str, tuple[int, object]]:
    return {t: (project.version(t), project.table_fingerprint(t)) for t in TABLES}


def _signatures(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    written = materialization_metadata(result)
    return {t: written[t].get("input_signature") for t in ("orders", "customers", "events")}


def _orders_days(project: Project) -> dict[str, list[dict]]:
    by_day: dict[str, list[dict]] = {}
    for row in project.table_rows("orders"):
        by_day.setdefault(row["order_date"].isoformat(), []).append(row)
    return {day: sorted(rows, key=lambda r: r["order_id"]) for day, rows in by_day.items()}


def _tick(project: Project, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
    context = dg.build_sensor_context(
        cursor=cursor, instance=project.instance, resources={"lake": project.lake}
    )
    result = source_sensor(ORDERS_SOURCE)(context)
    return list(result.run_requests or []), result.cursor


def test_a_bucket_landing_zone_loads_what_the_same_folder_loads(
    s3_bucket: S3Bucket, proxy: FaultProxy, tmp_path: Path
):
    landing, folder, bucket = _folder_and_bucket(tmp_path, s3_bucket, proxy)
    want, got = folder.run_days(DAYS[0], DAYS[-1]), bucket.run_days(DAYS[0], DAYS[-1])
    assert want.success and got.success
    assert all(check_results(got).values()), check_results(got)
    assert _signatures(got) == _signatures(want)
    assert {t: bucket.table_fingerprint(t) for t in TABLES} == {
        t: folder.table_fingerprint(t) for t in TABLES
    }
    assert bucket.table_fingerprint("orders").rows > 0

    # Reruns, per day and as the range, commit nothing and download nothing new.
    before = _state(bucket)
    for first, last in [(d, d) for d in DAYS] + [(DAYS[0], DAYS[-1])]:
        rerun = bucket.run_days(first, last)
        assert rerun.success
        assert {materialization_metadata(rerun)[t]["committed"] for t in TABLES} == {False}
    assert _state(bucket) == before

    # The sensor: every day once, then quiet ticks that list and never GET an object.
    requests, cursor = _tick(bucket, None)
    assert sorted(r.partition_key for r in requests) == DAYS
    proxy.set(log_requests=True)
    quiet, cursor = _tick(bucket, cursor)
    assert quiet == []
    fetched = [r for r in proxy.requests() if r["method"] == "GET" and "list-type" not in r["path"]]
    assert proxy.requests() and fetched == []

    # One file added to the second day in the bucket: exactly that day is requested and
    # changes; the other days' rows stay as they were.
    days_before = _orders_days(bucket)
    late = write_late_orders(landing, dt.date.fromisoformat(DAYS[1]), seed=5, n=3)
    s3_bucket.put(f"{PREFIX}/{late.relative_to(landing).as_posix()}", late.read_bytes())
    requests, cursor = _tick(bucket, cursor)
    assert [r.partition_key for r in requests] == [DAYS[1]]
    assert [
        r for r in proxy.requests() if r["method"] == "GET" and "list-type" not in r["path"]
    ] == []
    proxy.set()
    changed = bucket.run_days(DAYS[0], DAYS[-1], assets=["orders"])
    assert changed.success and materialization_metadata(changed)["orders"]["committed"] is True
    days_after = _orders_days(bucket)
    assert days_after[DAYS[0]] == days_before[DAYS[0]]
    assert days_after[DAYS[2]] == days_before[DAYS[2]]
    assert days_after[DAYS[1]] != days_before[DAYS[1]]

    # The same file replaced in place (other bytes, same name): that day again, once.
    write_late_orders(landing, dt.date.fromisoformat(DAYS[1]), seed=6, n=2).replace(late)
    s3_bucket.put(f"{PREFIX}/{late.relative_to(landing).as_posix()}", late.read_bytes())
    requests, cursor = _tick(bucket, cursor)
    assert [r.partition_key for r in requests] == [DAYS[1]]
    assert _tick(bucket, cursor)[0] == []

    # And the folder agrees once it has the same files.
    assert folder.run_days(DAYS[0], DAYS[-1], assets=["orders"]).success
    assert bucket.run_days(DAYS[0], DAYS[-1], assets=["orders"]).success
    assert bucket.table_fingerprint("orders") == folder.table_fingerprint("orders")


def test_landing_and_lake_both_in_the_bucket_from_the_environment_alone(
    s3_bucket: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # What an operator sets: two URIs and the standard AWS_* variables (set by aws_env).
    s3_bucket.upload_tree(_local_tree(tmp_path), PREFIX)
    monkeypatch.setenv("IDEM_LANDING_DIR", s3_bucket.uri(PREFIX))
    monkeypatch.setenv("IDEM_LAKE_DIR", s3_bucket.uri("lake"))
    project = _project(tmp_path, LakeResource())
    first = project.run_days(DAYS[0], DAYS[-1])
    assert first.success and all(check_results(first).values())
    assert project.table_fingerprint("orders").rows > 0
    assert s3_bucket.keys("lake/orders/_delta_log/")
    rerun = project.run_days(DAYS[0], DAYS[-1])
    assert rerun.success
    assert {materialization_metadata(rerun)[t]["committed"] for t in TABLES} == {False}
    assert not (tmp_path / "lake").exists() and not Path("s3:").exists()


def _failure(result: dg.ExecuteInProcessResult) -> str:
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failures, "the run should have failed"
    return "\n".join(e.event_specific_data.error.to_string() for e in failures)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "where", ["missing folder", "missing bucket", "empty prefix", "no endpoint"]
)
def test_a_landing_root_that_is_not_there_fails_the_run_by_name_and_touches_nothing(
    where: str, s3_bucket: S3Bucket, tmp_path: Path
):
    lake_dir = tmp_path / "lake"
    landing, expected = {
        "missing folder": (str(tmp_path / "landnig"), "does not exist: a typo or a missing mount?"),
        "missing bucket": ("s3://no-such-bucket-0042/landing", "the bucket does not exist"),
        "empty prefix": (s3_bucket.uri("landnig"), "holds no objects: a typo in"),
        "no endpoint": (s3_bucket.uri(PREFIX), "the endpoint cannot be reached"),
    }[where]
    options = {**HTTP, "endpoint": "http://127.0.0.1:9"} if where == "no endpoint" else {}
    project = _project(
        tmp_path, LakeResource(landing_dir=landing, lake_dir=str(lake_dir), storage_options=options)
    )
    result = project.run_days(DAYS[0], DAYS[-1])
    assert not result.success
    message = _failure(result)
    assert f"landing root {landing.rstrip('/')}: {expected}" in message
    assert "LakeResource.landing_dir" in message or where == "no endpoint"
    assert not lake_dir.exists() or not any(lake_dir.iterdir()), list(lake_dir.iterdir())


@pytest.mark.parametrize("change", ["replaced", "deleted"])
def test_an_object_changed_while_the_run_reads_its_day_fails_that_run_by_name(
    change: str, s3_bucket: S3Bucket, proxy: FaultProxy, tmp_path: Path
):
    landing, folder, bucket = _folder_and_bucket(tmp_path, s3_bucket, proxy)
    day = f"orders/date={DAYS[1]}"
    victim = sorted(p for p in (landing / day).iterdir() if p.suffix == ".csv")[0]
    header = victim.read_text().splitlines()[0]
    rows = victim.read_text().splitlines()[1:3]
    replacement = "\n".join([header, *rows]) + "\n" if change == "replaced" else None
    # The day is listed, then the first read of the object finds it replaced (or gone).
    proxy.change_before_get(s3_bucket, f"{PREFIX}/{day}/{victim.name}", replacement)
    failed = bucket.run_days(DAYS[0], DAYS[-1], assets=["orders"])
    assert not failed.success
    message = _failure(failed)
    assert f"{day}/{victim.name}: was {change} after it was listed" in message
    assert [f["fault"] for f in proxy.injected()] == [f"{change[:-1]} before get"]
    assert bucket.lake.table("orders").open() is None  # nothing half-written

    # The rerun reads the bytes now in the bucket: exactly what a folder with them loads.
    proxy.set()
    assert bucket.run_days(DAYS[0], DAYS[-1], assets=["orders"]).success
    if replacement is None:
        victim.unlink()
    else:
        victim.write_text(replacement)
    assert folder.run_days(DAYS[0], DAYS[-1], assets=["orders"]).success
    assert bucket.table_fingerprint("orders") == folder.table_fingerprint("orders")


def test_a_flaky_endpoint_in_front_of_the_landing_zone_never_loads_a_partial_day(
    s3_bucket: S3Bucket, proxy: FaultProxy, tmp_path: Path
):
    _, clean, flaky = _folder_and_bucket(tmp_path, s3_bucket, proxy)
    assert clean.run_days(DAYS[0], DAYS[-1]).success
    proxy.set(seed=21, error_rate=0.15, drop_rate=0.05, cut_rate=0.03, delay_ms=20)
    outcomes = []
    for _ in range(3):  # the object store's own retries ride through, or the run fails whole
        result = flaky.run_days(DAYS[0], DAYS[-1])
        outcomes.append(result.success)
        for table in TABLES:
            stored = flaky.lake.table(table).open()
            if stored is not None:  # whatever is stored is a whole, clean load
                assert flaky.table_fingerprint(table) == clean.table_fingerprint(table), table
        if result.success:
            break
    faults = {f["fault"] for f in proxy.injected()}
    assert {"503", "drop"} <= faults, faults
    proxy.set()
    assert flaky.run_days(DAYS[0], DAYS[-1]).success
    for table in TABLES:
        assert flaky.table_fingerprint(table) == clean.table_fingerprint(table), table


def test_a_root_without_the_sources_folder_loads_empty_days_and_says_why(
    s3_bucket: S3Bucket, tmp_path: Path
):
    s3_bucket.put(f"{PREFIX}/_SUCCESS", "")  # the landing zone exists; no source delivered yet
    project = _project(
        tmp_path,
        LakeResource(
            landing_dir=s3_bucket.uri(PREFIX), lake_dir=str(tmp_path / "lake"), storage_options=HTTP
        ),
    )
    result = project.run_days(DAYS[0], assets=["orders"])
    assert result.success
    written = materialization_metadata(result)["orders"]
    assert written["source_folder_exists"] is False and written["dagster/row_count"] == 0
    logged = [entry.user_message for entry in project.instance.all_logs(result.run_id)]
    assert any(
        f"there is no orders/ under the landing root {s3_bucket.uri(PREFIX)}" in m for m in logged
    ), logged
