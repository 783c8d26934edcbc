"""Flaky object storage: 503s, dropped connections, answers cut mid-body, slow answers and
the ambiguous commit.

A fault-injecting proxy (``s3_proxy.py``, its own process) stands between the project (the
lake through delta-rs, the landing zone through obstore) and the local S3 server. Whatever
it does, no Delta version is written twice, no row is lost or duplicated, and the next run
reconciles: the lake equals a clean local load. Answers cut mid-body are read again
(``idem_assets.transient``), so a run rides through them instead of failing.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from idem_assets.lake import fingerprint, read_rows
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.generator import generate
from idem_assets_tests.fixtures.s3 import FaultProxy, S3Bucket
from idem_assets_tests.harness import START, Project, day_keys, materialization_metadata
from idem_assets_tests.reliability.world import compare_lakes, record_row

pytestmark = pytest.mark.slow

TABLES = ("orders", "customers", "daily_sales")
DAYS = day_keys(2)
BUCKET_TABLES = ("orders", "customers", "events", "daily_sales")


def _project(root: Path, landing: Path, lake_dir: str) -> Project:
    return Project(
        root=root,
        lake=LakeResource(
            landing_dir=str(landing), lake_dir=lake_dir, storage_options={"allow_http": "true"}
        ),
        checkpoint=CheckpointResource(url=f"sqlite:///{root / 'state' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )


def _through_proxy(
    s3_bucket: S3Bucket, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Project, Project]:
    """A lake on the bucket reached through the proxy, and a clean local one."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    landing = tmp_path / "landing"
    generate(landing, START, len(DAYS), seed=7)
    flaky = _project(tmp_path / "flaky", landing, f"s3://{s3_bucket.name}/lake")
    clean = _project(tmp_path / "clean", landing, str(tmp_path / "clean" / "lake"))
    assert clean.run_days(DAYS[0], DAYS[-1], assets=TABLES).success
    return flaky, clean


def _history(project: Project, table: str) -> list[dict]:
    opened = project.lake.table(table).open()
    assert opened is not None
    return opened.history()


def _same_tables(flaky: Project, clean: Project) -> None:
    for table in TABLES:
        got = read_rows(flaky.lake.table(table).open())
        want = read_rows(clean.lake.table(table).open())
        assert fingerprint(got) == fingerprint(want), table


def test_a_lost_commit_response_neither_writes_a_version_twice_nor_loses_it(
    s3_bucket, proxy, tmp_path, monkeypatch
):
    flaky, clean = _through_proxy(s3_bucket, proxy, tmp_path, monkeypatch)
    # The table-creating commit and the next one both land, and neither writer hears it.
    proxy.set(seed=1, lose_commit_responses=2)
    first = flaky.run_days(DAYS[0], assets=["orders"])
    second = flaky.run_days(DAYS[1], assets=["orders"])
    lost = [f for f in proxy.injected() if f["fault"].startswith("lost response")]
    assert len(lost) == 2, proxy.injected()
    proxy.set(seed=2)
    for _ in range(2):  # a run that failed is retried, as a user or run retries would
        if first.success and second.success:
            break
        first = first if first.success else flaky.run_days(DAYS[0], assets=["orders"])
        second = second if second.success else flaky.run_days(DAYS[1], assets=["orders"])
    assert first.success and second.success
    # Exactly one version per day: 0 and 1, never a second copy of either commit.
    assert flaky.version("orders") == 1
    writes = [h for h in _history(flaky, "orders") if h.get("operation") != "CREATE TABLE"]
    assert len(writes) == 2, writes
    stored = read_rows(flaky.lake.table("orders").open())
    want = read_rows(clean.lake.table("orders").open())
    assert fingerprint(stored) == fingerprint(want)
    # The next runs reconcile: nothing more to commit.
    again = flaky.run_days(DAYS[0], DAYS[-1], assets=["orders"])
    assert again.success and materialization_metadata(again)["orders"]["committed"] is False
    assert flaky.version("orders") == 1
    _row(
        "ambiguous_commit",
        "2 Delta log PUTs land, their responses are lost",
        flaky,
        clean,
        3,
        tables=("orders",),
    )


def test_errors_drops_and_slow_answers_converge_to_a_clean_load(
    s3_bucket, proxy, tmp_path, monkeypatch
):
    flaky, clean = _through_proxy(s3_bucket, proxy, tmp_path, monkeypatch)
    proxy.set(seed=3, error_rate=0.15, drop_rate=0.05, delay_ms=5)
    attempts = 0
    done = False
    while not done and attempts < 4:
        attempts += 1
        done = flaky.run_days(DAYS[0], DAYS[-1], assets=TABLES).success
    injected = proxy.injected()
    assert {f["fault"] for f in injected} >= {"503", "drop"}, injected
    proxy.set(seed=4)
    if not done:
        assert flaky.run_days(DAYS[0], DAYS[-1], assets=TABLES).success
    _same_tables(flaky, clean)
    versions = {table: flaky.version(table) for table in TABLES}
    again = flaky.run_days(DAYS[0], DAYS[-1], assets=TABLES)
    assert again.success
    assert {t: materialization_metadata(again)[t]["committed"] for t in TABLES} == dict.fromkeys(
        TABLES, False
    )
    assert {table: flaky.version(table) for table in TABLES} == versions
    for table in TABLES:
        rows = read_rows(flaky.lake.table(table).open())
        assert rows.num_rows == read_rows(clean.lake.table(table).open()).num_rows, table
    faults = f"{len(injected)} injected: 503 15%, dropped connections 5%, 5 ms delay"
    _row("errors_drops_delays", faults, flaky, clean, attempts + 1)


def test_a_run_rides_through_503s_drops_and_answers_cut_mid_body_in_one_attempt(
    s3_bucket, proxy, tmp_path, monkeypatch
):
    """Landing zone and lake both in the bucket, every request through the proxy."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    days = day_keys(3)
    landing = tmp_path / "landing"
    generate(landing, START, len(days), seed=7)
    s3_bucket.upload_tree(landing, "exports/landing")
    clean = _project(tmp_path / "clean", landing, str(tmp_path / "clean" / "lake"))
    assert clean.run_days(days[0], days[-1], assets=BUCKET_TABLES).success
    flaky = Project(
        root=tmp_path / "flaky",
        lake=LakeResource(
            landing_dir=s3_bucket.uri("exports/landing"),
            lake_dir=s3_bucket.uri("lake"),
            storage_options={"allow_http": "true"},
        ),
        checkpoint=CheckpointResource(url=f"sqlite:///{tmp_path / 'flaky' / 'checkpoint.db'}"),
        instance=dg.DagsterInstance.ephemeral(),
    )
    proxy.set(seed=32, error_rate=0.10, drop_rate=0.03, cut_rate=0.03, log_requests=True)
    first = flaky.run_days(days[0], days[-1], assets=BUCKET_TABLES)
    seen = proxy.injected()
    proxy.set()
    assert first.success, [e.step_failure_data.error for e in first.get_step_failure_events()]
    faults = [f for f in seen if f["fault"] != "request"]
    cut = [f["path"] for f in faults if f["fault"] == "cut"]
    # Cuts hit both sides: landing files or listings and the lake's log and data.
    assert any("/exports/landing" in p or "list-type" in p for p in cut), cut
    assert any("/lake/" in p for p in cut), cut
    assert {f["fault"] for f in faults} >= {"503", "drop", "cut"}
    for table in BUCKET_TABLES:
        assert flaky.table_fingerprint(table) == clean.table_fingerprint(table), table
    versions = {table: flaky.version(table) for table in BUCKET_TABLES}
    again = flaky.run_days(days[0], days[-1], assets=BUCKET_TABLES)
    assert again.success
    written = materialization_metadata(again)
    assert {t: written[t]["committed"] for t in BUCKET_TABLES} == dict.fromkeys(
        BUCKET_TABLES, False
    )
    assert {table: flaky.version(table) for table in BUCKET_TABLES} == versions
    counts = {kind: sum(f["fault"] == kind for f in faults) for kind in ("503", "drop", "cut")}
    requests = sum(f["fault"] == "request" for f in seen)
    _row(
        "cut_mid_body",
        f"{requests} requests: {counts['503']} answered 503, {counts['drop']} dropped before "
        f"an answer, {counts['cut']} cut mid-body (landing and lake in the bucket)",
        flaky,
        clean,
        1,
        tables=BUCKET_TABLES,
    )


def _row(
    scenario: str,
    faults: str,
    flaky: Project,
    clean: Project,
    runs: int,
    tables: tuple[str, ...] = TABLES,
) -> None:
    found = compare_lakes(flaky.lake, clean.lake, tables)
    record_row(
        "object_storage",
        scenario,
        runs=runs,
        faults=faults,
        equal=found.equal,
        duplicates=found.duplicates,
        lost=found.lost,
    )
    assert found.equal and found.lost == 0
