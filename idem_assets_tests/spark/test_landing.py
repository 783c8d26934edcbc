"""The Spark landing reader accepts and quarantines exactly what the local reader does."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import Counter

import pytest

from idem_assets.lake import fingerprint
from idem_assets.landing import read_days
from idem_assets.landing.files import LandingFileError
from idem_assets.sample import CUSTOMERS, EVENTS, ORDERS, generate
from idem_assets.spark.commit import nullable
from idem_assets.spark.transforms import read_landing_spark, spark_fingerprint
from idem_assets_tests.landing.builders import DAY, day_file, put
from idem_assets_tests.spark.defects import write_defects

pytestmark = pytest.mark.spark
START, DAYS = dt.date(2024, 3, 1), 4
END = START + dt.timedelta(days=DAYS)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Four generated days with the default defects (seed 7)."""
    landing = tmp_path_factory.mktemp("landing")
    generate(landing, START, DAYS, seed=7)
    return landing


def _quarantined_files(rows) -> Counter:
    return Counter((r["source_file"], r["partition_date"]) for r in rows)


@pytest.mark.parametrize("contract", [ORDERS, CUSTOMERS, EVENTS], ids=lambda c: c.name)
def test_generated_days_read_to_the_local_rows_and_quarantine(spark, generated, contract):
    local = read_days(generated, contract, START, END)
    batch = read_landing_spark(spark, generated, contract, START, END).persist()
    assert batch.counts() == (local.rows.num_rows, local.quarantine.num_rows)
    assert spark_fingerprint(batch.rows) == fingerprint(local.rows)
    assert batch.rows.toArrow().schema == nullable(contract.schema)
    quarantined = [r.asDict() for r in batch.quarantine.collect()]
    assert _quarantined_files(quarantined) == _quarantined_files(local.quarantine.to_pylist())
    assert batch.files == tuple(f.relpath for f in local.files)
    batch.unpersist()


def _strict(contract):
    """The contract with every value rule raised to severity quarantine."""
    return dataclasses.replace(contract, rules=tuple(
        dataclasses.replace(rule, severity="quarantine") for rule in contract.rules))


def test_generated_orders_load_warned_values_and_quarantine_missing_versions(spark, generated):
    batch = read_landing_spark(spark, generated, ORDERS, START, END)
    reasons = {r.reason for r in batch.quarantine.collect()}
    assert reasons == {"updated_at: version column is null, so newest-wins cannot order this row"}
    # Unknown statuses and negative amounts break WARN rules only: they are loaded.
    loaded = batch.rows.filter("status = 'lost' OR amount < 0").count()
    local = read_days(generated, ORDERS, START, END).rows
    assert loaded == sum(1 for r in local.to_pylist() if r["status"] == "lost"
                         or r["amount"] < 0) > 0


def test_generated_orders_under_quarantine_rules_match_the_local_reasons(spark, generated):
    strict = _strict(ORDERS)
    local = read_days(generated, strict, START, END)
    batch = read_landing_spark(spark, generated, strict, START, END)
    assert spark_fingerprint(batch.rows) == fingerprint(local.rows)
    assert _reasons([r.asDict() for r in batch.quarantine.collect()]) == _reasons(
        local.quarantine.to_pylist())
    reasons = " | ".join(local.quarantine.column("reason").to_pylist())
    assert "'lost' is not allowed" in reasons and "is negative" in reasons


def _reasons(rows) -> Counter:
    return Counter((r["source_file"], r["partition_date"], r["reason"]) for r in rows)


# Reasons docs/spark.md lists as worded differently: no physical line numbers, and a JSON
# Lines file with a bad line is read as text by the local reader (its line-by-line parser).
_LINE_LEVEL = [
    (re.compile(r"^row has \d+ fields but the header has (\d+) \(line \d+\)(.*)$"),
     r"row does not have the header's \1 fields\2"),
]
_CAREFUL_JSON = "orders/date=2024-03-01/e.jsonl"


def _comparable(rows) -> Counter:
    out = Counter()
    for r in rows:
        reason = r["reason"]
        for pattern, spelled in _LINE_LEVEL:
            reason = pattern.sub(spelled, reason)
        if r["source_file"].endswith(".jsonl"):
            reason = re.sub(r" \(it has: .*\)$", "", reason)
        if r["source_file"] == _CAREFUL_JSON:
            reason = "judged line by line locally"
        out[(r["source_file"], r["partition_date"], reason)] += 1
    return out


@pytest.mark.parametrize("strict", [False, True], ids=["warn-rules", "quarantine-rules"])
def test_every_covered_defect_is_judged_like_the_local_reader(spark, tmp_path, strict):
    write_defects(tmp_path)
    contract = _strict(ORDERS) if strict else ORDERS
    end = DAY + dt.timedelta(days=1)
    local = read_days(tmp_path, contract, DAY, end)
    batch = read_landing_spark(spark, tmp_path, contract, DAY, end)
    # Under WARN rules the 'PAID', 'pa\nid' and -1.00 rows load; quarantine rules keep them out.
    assert batch.counts() == (local.rows.num_rows, local.quarantine.num_rows) == (
        (16, 27) if strict else (19, 24))
    assert fingerprint(batch.rows.toArrow()) == fingerprint(local.rows)
    spark_rows = [r.asDict() for r in batch.quarantine.collect()]
    assert _comparable(spark_rows) == _comparable(local.quarantine.to_pylist())
    # Parquet rows keep their row numbers; CSV and JSON Lines rows cannot have them.
    numbered = {(r["source_file"], r["row_number"]) for r in spark_rows if r["row_number"]}
    assert numbered == {(r["source_file"], r["row_number"]) for r in local.quarantine.to_pylist()
                        if r["source_file"].endswith(".parquet")}
    by_reason = " | ".join(r["reason"] for r in spark_rows)
    for expected in ("sub-microsecond", "2024-02-30", "outside the partition folder",
                     "natural key is null or blank", "version column is null",
                     "more than 2 decimal places", "is not an integer like 12",
                     "header's 6 fields", "not a valid date and time",
                     "does not fit decimal128(18, 2)", "file lacks contract column(s) amount",
                     "not a JSON object", "file lacks contract column(s) status",
                     "got a boolean value, expected an integer"):
        assert expected in by_reason
    assert ("'PAID' is not allowed" in by_reason) is strict
    assert ("is negative" in by_reason) is strict
    assert batch.dropped_columns == local.dropped_columns
    assert batch.notes == local.notes
    assert batch.ignored_files == local.ignored_files


def test_a_range_without_files_is_an_empty_batch(spark, tmp_path):
    batch = read_landing_spark(spark, tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=2))
    assert batch.counts() == (0, 0)
    assert batch.rows.columns == ORDERS.columns


def test_an_unreadable_parquet_footer_names_the_file(spark, tmp_path):
    put(tmp_path, day_file("broken.parquet"), b"PAR1 this is not parquet")
    with pytest.raises(LandingFileError, match="broken.parquet"):
        read_landing_spark(spark, tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=1))
