"""The Dagster surfaces the library touches, on real tables, in whatever set is installed.

A declared source's landing sensor, a single-run backfill through the IO manager on an
instance using each of the library's storages (SQLite and PostgreSQL, built on Dagster's
own storage classes), per-partition check results stored in that instance, and an unchanged
rerun that commits nothing and carries every check forward. And the fingerprints' known
answer: stored fingerprints stay comparable only while polars hashes rows alike.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sysconfig
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

import idem_assets
from idem_assets import (
    CheckpointResource,
    Column,
    DailySource,
    LakeResource,
    NotificationResource,
    default_resources,
    source_definitions,
)
from idem_assets.lake import fingerprint, read_rows

DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
CHECKS = {"rerun_equality", "unique_natural_key", "conservation", "quarantine_share"}
# The library's instance storages, each built on Dagster's own storage classes (SQLite's,
# dagster-postgres's) and their private parts: what changes first between releases.
STORAGES = {
    "sqlite": "module: idem_assets.instance.sqlite\n    class: SqliteStorage\n"
    "    config:\n      base_dir: {home}\n",
    "postgres": "module: idem_assets.instance.postgres\n    class: PostgresStorage\n"
    "    config:\n      postgres_url: {url}\n",
}


def test_the_version_is_the_installed_distributions():
    assert idem_assets.__version__ == metadata.version("idem_assets")
    assert Path(idem_assets.__file__).is_relative_to(sysconfig.get_paths()["purelib"])


def test_fingerprints_have_their_known_answer():
    """Recorded with the locked set; every polars patch release allowed must agree."""
    table = pa.table(
        {
            "id": pa.array([1, 2, 3, None], pa.int64()),
            "name": pa.array(["a", "ü", "", None], pa.string()),
            "price": pa.array(
                [
                    decimal.Decimal("1.10"),
                    decimal.Decimal("-0.01"),
                    None,
                    decimal.Decimal("99999.99"),
                ],
                pa.decimal128(10, 2),
            ),
            "ratio": pa.array([0.5, -0.0, float("nan"), None], pa.float64()),
            "day": pa.array(
                [dt.date(1992, 1, 1), dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)], pa.date32()
            ),
            "at": pa.array(
                [
                    dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC),
                    None,
                    dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
                    dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "flag": pa.array([True, False, None, True]),
        }
    )
    assert str(fingerprint(table)) == "v2:b1c47215a5c8888ee0abc4c8d593a260"
    assert str(fingerprint(table.slice(0, 0))) == "v2:" + "0" * 32
    # Row order and chunking do not matter.
    shuffled = pa.concat_tables([table.slice(2), table.slice(0, 2)])
    assert fingerprint(shuffled) == fingerprint(table)


SOURCE = DailySource(
    name="orders",
    first_day=DAYS[0],
    formats=("csv",),
    columns=(
        Column(name="order_id", type="int64"),
        Column(name="order_date", type="date"),
        Column(name="amount", type="decimal(12,2)"),
        Column(name="updated_at", type="timestamp"),
    ),
    natural_key=("order_id",),
    version="updated_at",
    partition_date="order_date",
)


def _landing(landing: Path) -> None:
    """Three days of orders, each with a repeated key whose newer version wins."""
    for number, day in enumerate(DAYS):
        folder = landing / "orders" / f"date={day}"
        folder.mkdir(parents=True)
        rows = [f"{number * 10 + i},{day},{i * 1.5:.2f},{day}T0{i}:00:00Z" for i in range(1, 4)]
        rows.append(f"{number * 10 + 1},{day},9.99,{day}T09:00:00Z")
        (folder / "orders.csv").write_text(
            "order_id,order_date,amount,updated_at\n" + "\n".join(rows)
        )


def _definitions(root: Path, landing: Path) -> tuple[dg.Definitions, LakeResource]:
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(root / "lake"))
    resources = default_resources(
        lake,
        CheckpointResource(url=f"sqlite:///{root / 'state.db'}"),
        NotificationResource(base_url="http://127.0.0.1:9", token="unused"),
    )
    return dg.Definitions.merge(
        source_definitions(SOURCE), dg.Definitions(resources=resources)
    ), lake


def _instance(home: Path, storage: str) -> dg.DagsterInstance:
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(
        f"storage:\n  custom:\n    {storage}telemetry:\n  enabled: false\n"
    )
    return dg.DagsterInstance.from_config(str(home))


@pytest.fixture(params=sorted(STORAGES))
def lake_project(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[dg.Definitions, dg.DagsterInstance, LakeResource]]:
    """Three landing days of a declared source, an empty lake, an instance on each storage."""
    _landing(tmp_path / "landing")
    definitions, lake = _definitions(tmp_path, tmp_path / "landing")
    url = ""
    if request.param == "postgres":
        # As deploy/postgres/dagster.yaml: dagster-postgres is written for psycopg2.
        url = request.getfixturevalue("fresh_postgres_url")
        url = url.replace("postgresql://", "postgresql+psycopg2://")
    home = tmp_path / "dagster_home"
    instance = _instance(home, STORAGES[request.param].format(home=home, url=url))
    yield definitions, instance, lake
    instance.dispose()


def _range_run(
    definitions: dg.Definitions, instance: dg.DagsterInstance, run_config: dict | None = None
) -> dg.ExecuteInProcessResult:
    job = definitions.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance,
        run_config=run_config,
        tags={
            "dagster/asset_partition_range_start": DAYS[0],
            "dagster/asset_partition_range_end": DAYS[-1],
        },
        raise_on_error=False,
    )


def _stored_checks(instance: dg.DagsterInstance, run_id: str) -> dict[tuple[str, str], bool]:
    """(check, partition) -> passed, as the instance stored them for the run."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    ).records
    found = {}
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data  # type: ignore[union-attr]
        found[(evaluation.check_name, evaluation.partition)] = evaluation.passed
    return found


def test_sensor_backfill_checks_and_an_unchanged_rerun(lake_project):
    definitions, instance, lake = lake_project
    sensor = definitions.resolve_sensor_def("orders_landing_sensor")
    context = dg.build_sensor_context(instance=instance, resources={"lake": lake})
    ticked = sensor(context)
    assert sorted(r.partition_key for r in ticked.run_requests) == list(DAYS)

    first = _range_run(definitions, instance)
    assert first.success
    table = lake.table("orders").open()
    assert table is not None
    rows = read_rows(table).sort_by("order_id").to_pylist()
    assert len(rows) == 9
    assert {r["order_id"]: str(r["amount"]) for r in rows}[1] == "9.99"
    stored = _stored_checks(instance, first.run_id)
    assert {(name, day) for name in CHECKS for day in DAYS} <= set(stored)
    assert all(stored[(name, day)] for name in CHECKS for day in DAYS), stored
    version = table.version()

    again = _range_run(definitions, instance)
    assert again.success
    reopened = lake.table("orders").open()
    assert reopened is not None and reopened.version() == version  # nothing committed
    stored = _stored_checks(instance, again.run_id)
    assert all(stored[(name, day)] for name in CHECKS for day in DAYS), stored
    materialized = [
        e.event_specific_data.materialization  # type: ignore[union-attr]
        for e in again.get_asset_materialization_events()
    ]
    assert {m.partition for m in materialized} == set(DAYS)
    assert all(m.metadata["committed"].value is False for m in materialized)

    # Every partition shows its materialization and its checks in the instance.
    assert instance.get_materialized_partitions(dg.AssetKey("orders")) == set(DAYS)
    context = dg.build_sensor_context(
        instance=instance, resources={"lake": lake}, cursor=ticked.cursor
    )
    ticked = sensor(context)
    assert not ticked.run_requests


def test_the_spark_engine_writes_what_the_local_engine_wrote(tmp_path: Path):
    """dagster-pyspark's resource starts a local Spark session; the table it writes has the
    local engine's fingerprint, and each day's checks (recomputed locally) pass."""
    _landing(tmp_path / "landing")
    tables = {}
    for engine in ("local", "spark"):
        definitions, lake = _definitions(tmp_path / engine, tmp_path / "landing")
        home = tmp_path / engine / "dagster_home"
        instance = _instance(home, STORAGES["sqlite"].format(home=home, url=""))
        config = {"ops": {"orders": {"config": {"engine": engine}}}}
        result = _range_run(definitions, instance, config)
        assert result.success
        assert all(_stored_checks(instance, result.run_id).values())
        materialized = [
            e.event_specific_data.materialization  # type: ignore[union-attr]
            for e in result.get_asset_materialization_events()
        ]
        engines = {getattr(m.metadata.get("engine"), "value", "local") for m in materialized}
        assert engines == {engine}
        instance.dispose()
        table = lake.table("orders").open()
        assert table is not None
        tables[engine] = read_rows(table)
    assert tables["spark"].num_rows == 9
    assert fingerprint(tables["spark"]) == fingerprint(tables["local"])
