"""Flaky object storage: 503s, dropped connections, slow answers and the ambiguous commit.

A fault-injecting proxy (``s3_proxy.py``, its own process) stands between delta-rs and the
local S3 server. Whatever it does, no Delta version is written twice, no row is lost or
duplicated, and the next run reconciles: the lake equals a clean local load.
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
