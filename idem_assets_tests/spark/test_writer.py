"""Spark overwrites commit through delta-rs and leave the table the local engine would."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, Transaction
from pyspark.sql import functions as F

from idem_assets.lake import (
    Commit,
    LakeTable,
    PartitionMismatchError,
    dedupe_newest,
    fingerprint,
    overwrite_partitions,
)
from idem_assets.lake.stored import table_fingerprint
from idem_assets.landing import read_days
from idem_assets.sample import ORDERS, generate
from idem_assets.spark.writer import append_spark, overwrite_partitions_spark
from idem_assets_tests.fixtures.spark import DRIVER_RESULT_LIMIT
from idem_assets_tests.spark.rows import to_spark

pytestmark = pytest.mark.spark
START, DAYS = dt.date(2024, 3, 1), 4
END = START + dt.timedelta(days=DAYS)
DAY2 = START + dt.timedelta(days=1)


@pytest.fixture(scope="module")
def orders(tmp_path_factory) -> pa.Table:
    """Four generated days of orders, deduplicated by the local engine."""
    landing = tmp_path_factory.mktemp("landing")
    generate(landing, START, DAYS, seed=7)
    rows = read_days(landing, ORDERS, START, END).rows
    return dedupe_newest(rows, ORDERS.natural_key, ORDERS.version_column).rows


def _spark_overwrite(spark, target, rows, start=START, end=END, **kwargs):
    return overwrite_partitions_spark(
        target, to_spark(spark, rows), "order_date", start, end, schema=ORDERS.schema, **kwargs
    )


def _local_overwrite(target, rows, start=START, end=END):
    return overwrite_partitions(target, rows, "order_date", start, end, schema=ORDERS.schema)


def _plain_read(target: LakeTable) -> pa.Table:
    """The table as plain delta-rs (DataFusion) reads it."""
    return pa.table(
        QueryBuilder().register("t", DeltaTable(target.uri)).execute("SELECT * FROM t").read_all()
    )


def _folders(target: LakeTable) -> set[str]:
    return {p.name for p in Path(target.uri).iterdir()}


def test_range_then_single_day_overwrites_equal_the_local_engine(spark, tmp_path, orders):
    on_spark, local = LakeTable(str(tmp_path / "spark")), LakeTable(str(tmp_path / "local"))
    first = _spark_overwrite(spark, on_spark, orders)
    _local_overwrite(local, orders)
    assert first.committed and first.version == 0 and first.rows_written == orders.num_rows
    assert first.fingerprint == fingerprint(orders)
    assert table_fingerprint(on_spark) == table_fingerprint(local) == fingerprint(orders)
    assert fingerprint(_plain_read(on_spark)) == fingerprint(orders)
    assert DeltaTable(on_spark.uri).schema() == DeltaTable(local.uri).schema()
    assert DeltaTable(on_spark.uri).metadata().partition_columns == ["order_date"]
    # One day again with half its orders: that day shrinks, the others stay as they were.
    day2 = orders.filter(pa.compute.equal(orders["order_date"], pa.scalar(DAY2)))
    half = day2.slice(0, day2.num_rows // 2)
    second = _spark_overwrite(spark, on_spark, half, DAY2, DAY2 + dt.timedelta(days=1))
    _local_overwrite(local, half, DAY2, DAY2 + dt.timedelta(days=1))
    assert second.committed and second.version == 1 and second.rows_written == half.num_rows
    assert table_fingerprint(on_spark) == table_fingerprint(local)
    assert table_fingerprint(on_spark).rows == orders.num_rows - (day2.num_rows - half.num_rows)
    history = DeltaTable(on_spark.uri).history(1)[0]
    assert history["idem.fingerprint"] == str(fingerprint(half))


def test_rerun_with_the_same_rows_commits_nothing_and_removes_its_staged_files(
    spark, tmp_path, orders
):
    target = LakeTable(str(tmp_path / "orders"))
    _spark_overwrite(spark, target, orders)
    folders = _folders(target)
    again = _spark_overwrite(spark, target, orders)
    assert not again.committed and again.rows_written == 0
    assert DeltaTable(target.uri).version() == 0
    assert _folders(target) == folders  # the rerun's staged folder is gone
    assert again.fingerprint == fingerprint(orders)


def test_rows_outside_the_range_are_refused_and_the_table_is_untouched(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "orders"))
    _spark_overwrite(spark, target, orders)
    before, folders = table_fingerprint(target), _folders(target)
    with pytest.raises(
        PartitionMismatchError,
        match=r"row\(s\) have order_date not in "
        r"\[2024-03-01, 2024-03-02\)",
    ) as refused:
        _spark_overwrite(spark, target, orders, START, DAY2)
    outside = (
        orders.num_rows
        - orders.filter(pa.compute.equal(orders["order_date"], pa.scalar(START))).num_rows
    )
    assert str(refused.value).startswith(f"{outside} row(s)")
    assert DeltaTable(target.uri).version() == 0
    assert table_fingerprint(target) == before
    assert _folders(target) == folders


def test_a_committed_txn_version_is_not_written_again(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "orders"))
    txn = Transaction(app_id="orders-backfill", version=3)
    first = _spark_overwrite(spark, target, orders, commit=Commit(txn=txn))
    assert first.committed and DeltaTable(target.uri).transaction_version("orders-backfill") == 3
    # Other rows under the same (app id, version): a replay, so nothing is staged or written.
    replay = _spark_overwrite(spark, target, orders.slice(0, 10), commit=Commit(txn=txn))
    assert not replay.committed and replay.details["txn_version"] == 3
    assert table_fingerprint(target) == fingerprint(orders)
    assert DeltaTable(target.uri).version() == 0


def test_local_engine_can_take_over_a_table_written_by_spark(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "orders"))
    _spark_overwrite(spark, target, orders)
    day2 = orders.filter(pa.compute.equal(orders["order_date"], pa.scalar(DAY2)))
    assert not _local_overwrite(target, day2, DAY2, DAY2 + dt.timedelta(days=1)).committed
    assert _local_overwrite(target, day2.slice(1), DAY2, DAY2 + dt.timedelta(days=1)).committed
    assert table_fingerprint(target).rows == orders.num_rows - 1


def test_a_table_laid_out_by_another_column_is_refused(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "orders"))
    overwrite_partitions(
        target, orders, "order_date", START, END, schema=ORDERS.schema, partitioned=False
    )
    with pytest.raises(ValueError, match=r"partitioned by \[\]"):
        _spark_overwrite(spark, target, orders.slice(0, 5))
    assert DeltaTable(target.uri).version() == 0
    assert _folders(target) == {
        "_delta_log",
        *(p.name for p in Path(target.uri).iterdir() if p.suffix == ".parquet"),
    }


def test_the_driver_only_collects_file_metadata(spark, tmp_path):
    """Data far over the driver's result limit is written; collecting it is refused."""
    blob = F.sha2(F.col("id").cast("string"), 512)
    rows = spark.range(250_000).select(
        F.date_add(F.lit(START), (F.col("id") % 3).cast("int")).alias("day"),
        F.col("id").alias("n"),
        F.concat(blob, blob).alias("payload"),
    )
    schema = pa.schema([("day", pa.date32()), ("n", pa.int64()), ("payload", pa.string())])
    target = LakeTable(str(tmp_path / "wide"))
    result = overwrite_partitions_spark(target, rows, "day", START, END, schema=schema)
    assert result.committed and result.rows_written == 250_000
    assert table_fingerprint(target).rows == 250_000
    with pytest.raises(Exception, match="maxResultSize"):
        rows.collect()
    assert DRIVER_RESULT_LIMIT == spark.conf.get("spark.driver.maxResultSize")


def test_append_commits_each_txn_version_once_and_empty_batches_advance_it(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "appended"))
    batch = to_spark(spark, orders.slice(0, 50))
    first = append_spark(
        target, batch, "feed", 0, schema=ORDERS.schema, partition_column="order_date"
    )
    replay = append_spark(
        target, batch, "feed", 0, schema=ORDERS.schema, partition_column="order_date"
    )
    empty = append_spark(
        target, batch.limit(0), "feed", 1, schema=ORDERS.schema, partition_column="order_date"
    )
    assert (first.committed, replay.committed, empty.committed) == (True, False, True)
    assert replay.fingerprint == first.fingerprint == fingerprint(orders.slice(0, 50))
    table = DeltaTable(target.uri)
    assert table.transaction_version("feed") == 1 and table.version() == 1
    assert table_fingerprint(target) == fingerprint(orders.slice(0, 50))


def test_a_table_with_check_constraints_is_left_to_a_checking_writer(spark, tmp_path, orders):
    target = LakeTable(str(tmp_path / "orders"))
    _local_overwrite(target, orders)
    DeltaTable(target.uri).alter.add_constraint({"order_id_positive": "order_id > 0"})
    version = DeltaTable(target.uri).version()
    with pytest.raises(ValueError, match="order_id_positive"):
        _spark_overwrite(spark, target, orders.slice(0, 5))
    assert DeltaTable(target.uri).version() == version
