"""Deletes on the Spark merge end where the local ``merge_with_deletes`` ends (issue 33).

The change days of ``lake/test_merge_deletes.py`` get a partition column, the signup date,
derived from the key (the Spark merge reads only the batch's partitions, so a key never
moves between them). Both engines load the same batches in the same order; each batch is
one or more whole days, so three random orders with reloads cover all 30 days in a few
dozen Spark merges.
"""

from __future__ import annotations

import datetime as dt
import random

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets.lake import LakeTable, fingerprint, read_rows
from idem_assets.lake.merge import merge_with_deletes
from idem_assets.sources.load import declaration_from_mapping
from idem_assets.spark.merge import merge_partitions_spark
from idem_assets_tests.harness import check_results, declared_definitions, materialization_metadata
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, OP, VERSION, change_days, reference
from idem_assets_tests.sources.test_delete_marker import DECLARED, _lay_out
from idem_assets_tests.spark.rows import to_spark

pytestmark = pytest.mark.spark
START = dt.date(2024, 3, 1)
PARTITION = "signup_date"
MARKER = (OP, "D")
SCHEMA = pa.schema(
    [
        (KEY, pa.int64()),
        (VERSION, pa.int64()),
        ("segment", pa.string()),
        (OP, pa.string()),
        (PARTITION, pa.date32()),
    ]
)


def signed_up(changes: pa.Table) -> pa.Table:
    """Changes with each key's partition, its signup date (one of seven, by key)."""
    dates = [START + dt.timedelta(days=key % 7) for key in changes[KEY].to_pylist()]
    return changes.append_column(PARTITION, pa.array(dates, pa.date32())).cast(SCHEMA)


def changes(*rows: tuple[int, int, str, str]) -> pa.Table:
    """Rows of (key, version, segment, op)."""
    return signed_up(
        pa.Table.from_pylist(
            [{KEY: k, VERSION: v, "segment": s, OP: op} for k, v, s, op in rows],
            pa.schema([f for f in SCHEMA if f.name != PARTITION]),
        )
    )


def _on_spark(spark, target, rows):
    return merge_partitions_spark(
        target,
        to_spark(spark, rows),
        [KEY],
        VERSION,
        PARTITION,
        schema=SCHEMA,
        delete_column=MARKER,
    )


def _local(target, rows):
    return merge_with_deletes(target, rows, [KEY], version_column=VERSION, delete_column=MARKER)


def _stored(target: LakeTable) -> dict[int, dict]:
    stored = read_rows(target.open()).to_pylist()
    assert len({row[KEY] for row in stored}) == len(stored)  # one row per key
    return {row[KEY]: row for row in stored}


def _batches(seed: int) -> list[list[int]]:
    """Every day once or twice, shuffled, cut into batches of one to five days."""
    rng = random.Random(seed)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)
    batches = []
    while order:
        size = rng.randint(1, 5)
        batches.append(order[:size])
        order = order[size:]
    return batches


@pytest.mark.parametrize("order", range(3))
def test_days_in_random_orders_with_reloads_equal_the_local_merge(spark, tmp_path, order):
    days = [signed_up(t) for t in change_days(order)]
    local, on_spark = LakeTable(str(tmp_path / "local")), LakeTable(str(tmp_path / "spark"))
    for batch in _batches(order):
        rows = pa.concat_tables([days[i] for i in batch])
        existed = on_spark.open() is not None
        ours, theirs = _on_spark(spark, on_spark, rows), _local(local, rows)
        # Same fingerprint (the batch as received), same decision, same changes.
        assert ours.fingerprint == theirs.fingerprint == fingerprint(rows)
        assert (ours.committed, ours.rows_written) == (theirs.committed, theirs.rows_written)
        if existed and ours.committed:
            assert (ours.rows_inserted, ours.rows_updated, ours.details["rows_deleted"]) == (
                theirs.rows_inserted,
                theirs.rows_updated,
                theirs.details["rows_deleted"],
            )
    assert _stored(on_spark) == _stored(local) == reference(days)
    assert fingerprint(read_rows(on_spark.open())) == fingerprint(read_rows(local.open()))
    assert DeltaTable(on_spark.uri).metadata().partition_columns == [PARTITION]
    assert OP not in read_rows(on_spark.open()).column_names


def test_an_unchanged_rerun_commits_no_version(spark, tmp_path):
    days = [signed_up(t) for t in change_days(5)][:8]
    target = LakeTable(str(tmp_path / "spark"))
    for batch in ([0, 1, 2, 3], [7, 6, 5, 4]):
        assert _on_spark(spark, target, pa.concat_tables([days[i] for i in batch])).committed
    version = target.open().version()
    for rerun in (days[2], pa.concat_tables(days[::-1])):
        result = _on_spark(spark, target, rerun)
        assert not result.committed and result.rows_written == 0
        assert result.fingerprint == fingerprint(rerun)
    assert target.open().version() == version
    assert _stored(target) == reference(days)


def test_a_delete_and_an_upsert_of_a_key_at_one_version_leave_no_row_on_both_engines(
    spark, tmp_path
):
    loads = [
        # The first write: its table is created empty on both engines.
        (changes((1, 5, "smb", "U"), (1, 5, "smb", "D")), set()),
        (changes((1, 5, "smb", "U"), (2, 5, "smb", "U")), {2}),  # the delete is kept
        (changes((2, 6, "consumer", "D"), (2, 6, "consumer", "U"), (3, 6, "smb", "U")), {3}),
    ]
    local, on_spark = LakeTable(str(tmp_path / "local")), LakeTable(str(tmp_path / "spark"))
    for batch, keys in loads:
        ours, theirs = _on_spark(spark, on_spark, batch), _local(local, batch)
        assert ours.committed and theirs.committed
        assert set(_stored(on_spark)) == set(_stored(local)) == keys
        assert ours.details["rows_deleted"] == theirs.details.get("rows_deleted", 0)
    assert ours.details["rows_deleted"] == 1 and ours.rows_deleted == 1
    assert _stored(on_spark) == _stored(local)


def test_a_newer_upsert_after_a_delete_resurrects_the_key_on_both_engines(spark, tmp_path):
    loads = [
        (changes((1, 1, "smb", "U")), {1: 1}),
        (changes((1, 3, "smb", "D")), {}),
        (changes((1, 2, "enterprise", "U")), {}),  # older than the delete: stays deleted
        (changes((1, 4, "consumer", "U")), {1: 4}),
    ]
    local, on_spark = LakeTable(str(tmp_path / "local")), LakeTable(str(tmp_path / "spark"))
    for rows, versions in loads:
        ours, theirs = _on_spark(spark, on_spark, rows), _local(local, rows)
        assert ours.committed == theirs.committed
        for target in (on_spark, local):
            assert {k: row[VERSION] for k, row in _stored(target).items()} == versions
    assert _stored(on_spark) == _stored(local)
    assert _stored(on_spark)[1]["segment"] == "consumer"


def test_a_declared_delete_marker_on_the_spark_engine_passes_every_check(spark, tmp_path):
    """The IO manager hands the Spark frame and the marker to the Spark merge; the checks
    recompute with the local engine, so passing them is the cross-engine proof."""
    days = change_days(11)
    landing = tmp_path / "landing"
    _lay_out(landing, days)
    source = declaration_from_mapping(DECLARED, "test")
    defs, lake = declared_definitions([source], landing, tmp_path)
    alone = dg.define_asset_job("alone", selection=dg.AssetSelection.assets("crm_customers"))
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def("alone")
    instance = dg.DagsterInstance.ephemeral()
    on_spark = {"ops": {"crm_customers": {"config": {"engine": "spark"}}}}
    rng = random.Random(11)
    picked = rng.sample(range(DAYS), 4)
    for index in [*picked, picked[0]]:
        key = (START + dt.timedelta(days=index)).isoformat()
        result = job.execute_in_process(partition_key=key, instance=instance, run_config=on_spark)
        metadata = materialization_metadata(result)["crm_customers"]
        assert metadata["engine"] == "spark"
        checks = check_results(result)
        assert checks and all(checks.values()), checks
    assert metadata["committed"] is False  # the reload
    stored = read_rows(lake.table("crm_customers").open()).to_pylist()
    assert stored and OP not in stored[0]
    assert {row[KEY]: row for row in stored} == reference([days[i] for i in picked])


def test_a_declared_history_on_the_spark_engine_equals_the_local_one(spark, tmp_path):
    """Executors read the change sets; the history is the local engine's, every check green."""
    days = change_days(12)
    landing = tmp_path / "landing"
    _lay_out(landing, days)
    history = {**DECLARED, "strategy": "history"}
    tables = []
    for engine in ("spark", "local"):
        source = declaration_from_mapping(history, "test")
        defs, lake = declared_definitions([source], landing, tmp_path / engine)
        alone = dg.define_asset_job("alone", selection=dg.AssetSelection.assets("crm_customers"))
        job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def("alone")
        instance = dg.DagsterInstance.ephemeral()
        run_config = {"ops": {"crm_customers": {"config": {"engine": engine}}}}
        for index in [3, 1, 2, 1]:
            key = (START + dt.timedelta(days=index)).isoformat()
            result = job.execute_in_process(
                partition_key=key, instance=instance, run_config=run_config
            )
            assert materialization_metadata(result)["crm_customers"].get("engine", "local") == (
                "spark" if engine == "spark" else "local"
            )
            checks = check_results(result)
            assert checks and all(checks.values()), checks
        tables.append(fingerprint(read_rows(lake.table("crm_customers").open())))
    assert tables[0] == tables[1] and tables[0].rows > 0
