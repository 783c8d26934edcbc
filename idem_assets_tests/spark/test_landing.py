"""The Spark landing reader accepts and quarantines exactly what the local reader does."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from idem_assets.landing import landing_root, read_days
from idem_assets.landing.errors import LandingFileError
from idem_assets.sample import CUSTOMERS, EVENTS, ORDERS, generate
from idem_assets.spark.landing import read_landing_spark
from idem_assets_tests.landing.builders import DAY, day_file, put
from idem_assets_tests.spark.defects import write_defects
from idem_assets_tests.spark.parity import assert_same_read

pytestmark = pytest.mark.spark
START, DAYS = dt.date(2024, 3, 1), 4
END = START + dt.timedelta(days=DAYS)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Four generated days with the default defects (seed 7)."""
    landing = tmp_path_factory.mktemp("landing")
    generate(landing, START, DAYS, seed=7)
    return landing


def _strict(contract):
    """The contract with every value rule raised to severity quarantine."""
    return dataclasses.replace(
        contract,
        rules=tuple(dataclasses.replace(rule, severity="quarantine") for rule in contract.rules),
    )


@pytest.mark.parametrize(
    "contract",
    [ORDERS, CUSTOMERS, EVENTS, _strict(ORDERS), _strict(CUSTOMERS), _strict(EVENTS)],
    ids=lambda c: f"{c.name}-{c.rules[0].severity}",
)
def test_generated_days_read_to_the_local_rows_and_quarantine(spark, generated, contract):
    local = read_days(generated, contract, START, END)
    batch = read_landing_spark(spark, generated, contract, START, END).persist()
    assert_same_read(batch, local)
    batch.unpersist()


def test_generated_orders_load_warned_values_and_quarantine_missing_versions(spark, generated):
    batch = read_landing_spark(spark, generated, ORDERS, START, END)
    reasons = {r.reason for r in batch.quarantine.collect()}
    assert reasons == {"updated_at: version column is null, so newest-wins cannot order this row"}
    # Unknown statuses and negative amounts break WARN rules only: they are loaded.
    loaded = batch.rows.filter("status = 'lost' OR amount < 0").count()
    local = read_days(generated, ORDERS, START, END).rows.to_pylist()
    assert loaded == sum(1 for r in local if r["status"] == "lost" or r["amount"] < 0) > 0
    # Declared with severity quarantine, the same rules keep those rows out, with reasons.
    strict = read_landing_spark(spark, generated, _strict(ORDERS), START, END)
    reasons = " | ".join(r.reason for r in strict.quarantine.collect())
    assert "'lost' is not allowed (expected one of" in reasons
    assert "is negative (must be >= 0)" in reasons


@pytest.mark.parametrize("strict", [False, True], ids=["warn-rules", "quarantine-rules"])
def test_every_covered_defect_is_judged_like_the_local_reader(spark, tmp_path, strict):
    write_defects(tmp_path)
    contract = _strict(ORDERS) if strict else ORDERS
    end = DAY + dt.timedelta(days=1)
    local = read_days(tmp_path, contract, DAY, end)
    batch = read_landing_spark(spark, tmp_path, contract, DAY, end)
    spark_rows = assert_same_read(batch, local)
    # Under WARN rules the 'PAID', 'pa\nid' and -1.00 rows load; quarantine rules keep them out.
    assert batch.counts() == ((16, 27) if strict else (19, 24))
    by_reason = " | ".join(r["reason"] for r in spark_rows)
    for expected in (
        "sub-microsecond",
        "2024-02-30",
        "outside the partition folder",
        "natural key is null or blank",
        "version column is null",
        "more than 2 decimal places",
        "is not an integer like 12",
        "but the header has 6",
        "not a valid date and time",
        "does not fit decimal128(18, 2)",
        "file lacks contract column(s) amount",
        "not an object",
        "file lacks contract column(s) status",
        "'true' is not an integer like 12",
    ):
        assert expected in by_reason
    assert ("'PAID' is not allowed" in by_reason) is strict
    assert ("is negative" in by_reason) is strict


def test_a_range_without_files_is_an_empty_batch(spark, tmp_path):
    batch = read_landing_spark(spark, tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=2))
    assert batch.counts() == (0, 0)
    assert batch.rows.columns == ORDERS.columns


def test_an_unreadable_parquet_footer_names_the_file(spark, tmp_path):
    put(tmp_path, day_file("broken.parquet"), b"PAR1 this is not parquet")
    with pytest.raises(LandingFileError, match="broken.parquet"):
        read_landing_spark(spark, tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=1))


def _options(s3_bucket, endpoint: str) -> dict[str, str]:
    """Storage options that travel with each task: the executors read no environment."""
    return {
        "endpoint": endpoint,
        "allow_http": "true",
        "region": "us-east-1",
        "access_key_id": s3_bucket.credentials["AWS_ACCESS_KEY_ID"],
        "secret_access_key": s3_bucket.credentials["AWS_SECRET_ACCESS_KEY"],
    }


def test_a_bucket_landing_zone_is_read_by_the_executors_like_the_folder(
    spark, generated, s3_bucket
):
    s3_bucket.upload_tree(generated, "landing")
    root = landing_root(s3_bucket.uri("landing"), _options(s3_bucket, s3_bucket.endpoint))
    batch = read_landing_spark(spark, root, EVENTS, START, END)
    assert_same_read(batch, read_days(generated, EVENTS, START, END))
    assert batch.counts()[0] > 0
    batch.unpersist()


def test_executors_read_on_through_answers_cut_mid_body(spark, generated, s3_bucket, proxy):
    """The executors' reads go through the fault proxy: 503s and answers cut mid-body are
    read again (a cut file goes on from the byte it stopped at), and the rows are the
    folder's."""
    s3_bucket.upload_tree(generated, "landing")
    proxy.set(seed=5, error_rate=0.1, cut_rate=0.3)
    root = landing_root(s3_bucket.uri("landing"), _options(s3_bucket, proxy.endpoint))
    batch = read_landing_spark(spark, root, ORDERS, START, END)
    assert_same_read(batch, read_days(generated, ORDERS, START, END))
    batch.unpersist()
    cut = [f["path"] for f in proxy.injected() if f["fault"] == "cut"]
    assert any("/landing/orders/" in p and "list-type" not in p for p in cut), cut


def test_a_file_read_in_many_pieces_on_the_executors_equals_one_read_whole(spark, tmp_path):
    write_defects(tmp_path)
    end = DAY + dt.timedelta(days=1)
    batch = read_landing_spark(spark, tmp_path, ORDERS, DAY, end, piece_bytes=97)
    assert_same_read(batch, read_days(tmp_path, ORDERS, DAY, end))
    batch.unpersist()


def test_large_files_keep_their_judged_rows_on_disk():
    """A spilled block of a few hundred MiB read back into a 1 GiB heap ran it out of
    memory (the 0.29 GB CSV day of benchmark S6): past 32 MiB a file's rows stay on disk."""
    from pyspark import StorageLevel

    from idem_assets.spark.landing import storage_level

    small = [("a.csv", 10 << 20), ("b.jsonl", 20 << 20)]
    assert storage_level(small) == StorageLevel.MEMORY_AND_DISK
    assert storage_level([*small, ("c.csv", 290 << 20)]) == StorageLevel.DISK_ONLY
    assert storage_level([("d.csv.gz", 4 << 20)]) == StorageLevel.DISK_ONLY  # ~40 MiB inflated
    assert storage_level([]) == StorageLevel.MEMORY_AND_DISK
