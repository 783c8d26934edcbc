"""Spark merges rewrite only changed partitions and end where the local MERGE ends."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from idem_assets.lake import LakeTable, fingerprint, merge_upsert
from idem_assets.lake.stored import data_files, table_fingerprint
from idem_assets.landing import read_days
from idem_assets.sample import CUSTOMERS, EVENTS, EVENTS_SOURCE, generate
from idem_assets.spark.merge import merge_partitions_spark
from idem_assets_tests.spark.rows import to_spark

pytestmark = pytest.mark.spark
START, DAYS = dt.date(2024, 3, 1), 4
KEY, VERSION, PARTITION = ["event_id"], "ingested_at", "event_date"
EVENTS_SCHEMA = EVENTS_SOURCE.table_schema()


def with_event_date(rows: pa.Table) -> pa.Table:
    """The events table's rows: landing rows plus event_date, the UTC day of event_time."""
    return rows.append_column("event_date", pc.cast(rows["event_time"], pa.date32()))


@pytest.fixture(scope="module")
def event_days(tmp_path_factory) -> list[pa.Table]:
    """Each generated day's events (re-ingestions of the day before included)."""
    landing = tmp_path_factory.mktemp("landing")
    generate(landing, START, DAYS, seed=7)
    days = [START + dt.timedelta(days=k) for k in range(DAYS)]
    return [
        with_event_date(read_days(landing, EVENTS, d, d + dt.timedelta(days=1)).rows) for d in days
    ]


def _spark_merge(spark, target, rows):
    return merge_partitions_spark(
        target, to_spark(spark, rows), KEY, VERSION, PARTITION, schema=EVENTS_SCHEMA
    )


def _local_merge(target, rows):
    return merge_upsert(
        target,
        rows,
        KEY,
        version_column=VERSION,
        partition_column=PARTITION,
        prune_columns=[PARTITION],
        schema=EVENTS_SCHEMA,
    )


def test_days_merged_forward_or_in_reverse_equal_the_local_merge(spark, tmp_path, event_days):
    local = LakeTable(str(tmp_path / "local"))
    for rows in event_days:
        _local_merge(local, rows)
    expected = table_fingerprint(local)
    for name, order in (("forward", event_days), ("reverse", event_days[::-1])):
        target = LakeTable(str(tmp_path / name))
        results = [_spark_merge(spark, target, rows) for rows in order]
        assert all(r.committed for r in results)
        assert table_fingerprint(target) == expected, name
        # The reported fingerprint is the deduplicated batch's, as in the local merge.
        assert [r.fingerprint for r in results] == [fingerprint(rows) for rows in order]
        version = DeltaTable(target.uri).version()
        rerun = _spark_merge(spark, target, order[1])
        assert not rerun.committed and rerun.rows_written == 0
        assert DeltaTable(target.uri).version() == version
    # Forward, day 2 re-ingests ~5% of day 1: those are updates, the rest inserts.
    forward = LakeTable(str(tmp_path / "again"))
    _spark_merge(spark, forward, event_days[0])
    second = _spark_merge(spark, forward, event_days[1])
    local_second = _local_merge(
        LakeTable(str(tmp_path / "local2")), event_days[0]
    ) and _local_merge(LakeTable(str(tmp_path / "local2")), event_days[1])
    assert (second.rows_inserted, second.rows_updated) == (
        local_second.rows_inserted,
        local_second.rows_updated,
    )
    assert second.rows_updated > 0


def test_only_partitions_where_a_batch_row_wins_are_rewritten(spark, tmp_path, event_days):
    target = LakeTable(str(tmp_path / "events"))
    day = event_days[1]
    _spark_merge(spark, target, day)
    before = {f.path: f.partition_value for f in data_files(DeltaTable(target.uri), PARTITION)}
    # Stored rows again plus one of them with a newer ingested_at.
    newest = pc.max(day[VERSION]).as_py() + dt.timedelta(hours=1)
    one = day.slice(0, 1)
    changed = one.set_column(
        one.schema.get_field_index(VERSION),
        VERSION,
        pa.array([newest], day.schema.field(VERSION).type),
    )
    result = _spark_merge(spark, target, pa.concat_tables([day, changed]))
    assert result.committed and (result.rows_inserted, result.rows_updated) == (0, 1)
    assert result.details["partitions_rewritten"] == 1
    assert result.details["duplicates_dropped"] == 1
    after = {f.path: f.partition_value for f in data_files(DeltaTable(target.uri), PARTITION)}
    touched = one[PARTITION][0].as_py()
    assert {p for p, v in before.items() if v != touched} <= set(after)
    assert not {p for p, v in before.items() if v == touched} & set(after)
    assert result.details["files_removed"] == sum(v == touched for v in before.values())
    assert table_fingerprint(target).rows == day.num_rows


def test_equal_versions_with_other_content_resolve_like_local_in_either_order(
    spark, tmp_path, event_days
):
    row = event_days[0].slice(0, 1)
    other = row.set_column(
        row.schema.get_field_index("payload"), "payload", pa.array(['{"other":true}'])
    )
    local = LakeTable(str(tmp_path / "local"))
    _local_merge(local, row)
    _local_merge(local, other)
    for name, batches in (("ab", (row, other)), ("ba", (other, row))):
        target = LakeTable(str(tmp_path / name))
        for batch in batches:
            _spark_merge(spark, target, batch)
        assert table_fingerprint(target) == table_fingerprint(local), name


def test_unpartitioned_merge_of_customer_change_sets_equals_the_local_merge(spark, tmp_path):
    landing = tmp_path / "landing"
    generate(landing, START, 3, seed=11)
    local, on_spark = LakeTable(str(tmp_path / "local")), LakeTable(str(tmp_path / "spark"))
    for offset in (2, 0, 1):  # out of order: a late older change must not win
        day = START + dt.timedelta(days=offset)
        rows = read_days(landing, CUSTOMERS, day, day + dt.timedelta(days=1)).rows
        merge_upsert(
            local, rows, ["customer_id"], version_column="updated_at", schema=CUSTOMERS.schema
        )
        result = merge_partitions_spark(
            on_spark,
            to_spark(spark, rows),
            ["customer_id"],
            "updated_at",
            None,
            schema=CUSTOMERS.schema,
        )
        assert result.committed
    assert table_fingerprint(on_spark) == table_fingerprint(local)
    assert DeltaTable(on_spark.uri).metadata().partition_columns == []
