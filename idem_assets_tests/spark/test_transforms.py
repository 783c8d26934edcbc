"""Spark dedupe and fingerprints give exactly the local engine's results."""

from __future__ import annotations

import pyarrow as pa
import pytest

from idem_assets.lake import dedupe_newest, fingerprint
from idem_assets.lake.erasure import Erased
from idem_assets.spark.erasure import without_erased_spark
from idem_assets.spark.fingerprint import spark_fingerprint
from idem_assets.spark.resource import require_settings, spark_config
from idem_assets.spark.transforms import dedupe_newest_spark
from idem_assets.spark_resources import pyspark_resource, session_of
from idem_assets_tests.spark.rows import shuffled, tied_orders, to_spark

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dedupe_keeps_the_local_engines_survivors_including_ties(spark, seed):
    rows = tied_orders(seed)
    local = dedupe_newest(rows, ["order_id"], "updated_at")
    # Ties on the version with other content are the hard case: make sure they occur.
    assert local.conflicting_keys > 5
    for order in (rows, shuffled(rows, seed)):
        result = dedupe_newest_spark(
            to_spark(spark, order), ["order_id"], "updated_at", fingerprint=True
        )
        survivors = result.rows.toArrow()
        assert fingerprint(survivors) == fingerprint(local.rows) == result.fingerprint
        assert result.duplicates_dropped == local.duplicates_dropped
        assert result.conflicting_keys == local.conflicting_keys


def test_dedupe_without_version_breaks_ties_by_content_like_local(spark):
    rows = tied_orders(9).drop_columns(["updated_at"])
    local = dedupe_newest(rows, ["order_id"], None)
    result = dedupe_newest_spark(to_spark(spark, rows), ["order_id"], None)
    assert fingerprint(result.rows.toArrow()) == fingerprint(local.rows)
    assert result.duplicates_dropped == local.duplicates_dropped == rows.num_rows - 60


def test_dedupe_names_missing_columns(spark):
    with pytest.raises(ValueError, match=r"\['version'\]"):
        dedupe_newest_spark(to_spark(spark, tied_orders(1, rows=5)), ["order_id"], "version")


def test_spark_fingerprint_equals_the_local_fingerprint(spark):
    rows = tied_orders(4)
    frame = to_spark(spark, rows).repartition(3)
    assert spark_fingerprint(frame) == fingerprint(rows)
    assert spark_fingerprint(frame.limit(0)) == fingerprint(rows.slice(0, 0))
    # A single changed value changes it.
    changed = rows.set_column(
        0, "order_id", pa.array([r + 1 for r in rows.column("order_id").to_pylist()])
    )
    assert spark_fingerprint(to_spark(spark, changed)) != fingerprint(rows)


def test_required_settings_cannot_be_overridden_and_are_checked_on_sessions(spark):
    with pytest.raises(ValueError, match="spark.sql.session.timeZone"):
        spark_config(conf={"spark.sql.session.timeZone": "Europe/Berlin"})
    config = spark_config("spark://cluster:7077", {"spark.executor.memory": "8g"})
    assert config["spark.master"] == "spark://cluster:7077"
    assert "spark.driver.host" not in config  # loopback binding is for local masters only
    assert config["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")
    try:
        with pytest.raises(ValueError, match="Europe/Berlin"):
            require_settings(spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_dagster_resource_yields_a_session_with_the_engine_settings(spark):
    resource = pyspark_resource(conf={"spark.sql.shuffle.partitions": "2"})
    assert resource.spark_config["spark.sql.ansi.enabled"] == "true"
    session = session_of(resource)
    require_settings(session)
    assert session.range(3).count() == 3


def test_erased_keys_leave_a_spark_frame_as_they_leave_an_arrow_table(spark):
    rows = tied_orders(4)
    customer = rows.column("customer_id")[0].as_py()
    erased = Erased({"customer_id": frozenset({str(customer)}), "email": frozenset({"x"})})
    local, removed = erased.without(rows)
    assert removed > 0
    kept = without_erased_spark(to_spark(spark, rows), erased).toArrow()
    assert fingerprint(kept) == fingerprint(local)
