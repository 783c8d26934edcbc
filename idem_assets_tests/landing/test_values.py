"""Value rules: timestamps, dates, integers, money, nulls, bounds, allowed values, signs."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest

from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.sample.sources import EVENTS, ORDERS
from idem_assets_tests.landing.builders import (
    DAY,
    column,
    day_file,
    jsonl,
    order,
    orders_csv,
    put,
    reasons,
)

UTC = dt.UTC
TEN = "2024-03-01T10:00:00Z"


def _utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01T10:00:00Z", _utc(2024, 3, 1, 10)),
        ("2024-03-01T10:00:00z", _utc(2024, 3, 1, 10)),
        ("2024-03-01T12:00:00+02:00", _utc(2024, 3, 1, 10)),
        ("2024-03-01T08:30:00-01:30", _utc(2024, 3, 1, 10)),
        ("2024-03-01T10:00:00", _utc(2024, 3, 1, 10)),
        ("2024-03-01 10:00:00", _utc(2024, 3, 1, 10)),
        ("2024-03-01 10:00:00Z", _utc(2024, 3, 1, 10)),
        ("2024-03-01T10:00:00.5Z", _utc(2024, 3, 1, 10, 0, 0, 500_000)),
        ("2024-03-01T10:00:00.123456+00:00", _utc(2024, 3, 1, 10, 0, 0, 123_456)),
        ("2024-03-01T10:00:00.123456000Z", _utc(2024, 3, 1, 10, 0, 0, 123_456)),
        ("  2024-03-01T10:00:00Z ", _utc(2024, 3, 1, 10)),
    ],
)
def test_timestamp_forms_are_normalised_to_utc(read_day, tmp_path, text, expected):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,7,12.34,paid,2024-03-01,{text}"))
    batch = read_day(tmp_path)
    assert column(batch, "updated_at") == [expected]
    assert batch.quarantine.num_rows == 0


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("2024-03-01T10:00", "is not an ISO-8601 timestamp"),
        ("2024-03-01", "is not an ISO-8601 timestamp"),
        ("01/03/2024 10:00:00", "is not an ISO-8601 timestamp"),
        ("2024-03-01T10:00:00+02:0", "is not an ISO-8601 timestamp"),
        ("2024-03-01T10:00:00+2", "is not an ISO-8601 timestamp"),
        ("2024-02-30T10:00:00Z", "is not a valid date and time"),
        ("2024-03-01T25:00:00Z", "is not a valid date and time"),
        ("2024-03-01T10:00:00.1234567Z", "has sub-microsecond precision"),
    ],
)
def test_bad_timestamps_are_quarantined_with_the_value_and_rule(read_day, tmp_path, text, rule):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,7,12.34,paid,2024-03-01,{text}"))
    batch = read_day(tmp_path)
    assert batch.rows.num_rows == 0
    [reason] = reasons(batch)
    assert reason.startswith(f"updated_at: value '{text.strip()}' {rule}")


@pytest.mark.parametrize("text", ["2024-3-1", "20240301", "2024-02-30", "yesterday"])
def test_dates_must_be_yyyy_mm_dd(read_day, tmp_path, text):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,7,12.34,paid,{text},2024-03-01T10:00:00Z"))
    [reason] = reasons(read_day(tmp_path))
    assert reason.startswith(f"order_date: value '{text}' is not a")


@pytest.mark.parametrize(
    ("text", "expected"), [("123", 123), ("123.0", 123), ("+5", 5), ("-0", 0), (" 42 ", 42)]
)
def test_integer_text_is_accepted(read_day, tmp_path, text, expected):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,{text},12.34,paid,2024-03-01,{TEN}"))
    assert column(read_day(tmp_path), "customer_id") == [expected]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("123.5", "is not an integer like 12"),
        ("abc", "is not an integer like 12"),
        ("1e3", "is not an integer like 12"),
        ("99999999999999999999", "is outside int64"),
    ],
)
def test_non_integers_are_quarantined(read_day, tmp_path, text, rule):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,{text},12.34,paid,2024-03-01,{TEN}"))
    [reason] = reasons(read_day(tmp_path))
    assert reason == f"customer_id: value '{text}' {rule}"


def test_json_numbers_for_integers(read_day, tmp_path):
    records = [
        order(1, customer_id=123),
        order(2, customer_id=123.0),
        order(3, customer_id="9"),
        order(4, customer_id=123.5),
        order(5, customer_id=True),
    ]
    put(tmp_path, day_file("a.jsonl"), jsonl(*records))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 2, 3]
    assert column(batch, "customer_id") == [123, 123, 9]
    assert [r.split(" ")[0] for r in reasons(batch)] == ["customer_id:", "customer_id:"]
    assert "123.5" in reasons(batch)[0]
    assert batch.quarantine.column("row_number").to_pylist() == [4, 5]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.34", "12.34"),
        ("12", "12.00"),
        ("12.5", "12.50"),
        ("12.340", "12.34"),
        ("0.00", "0.00"),
        ("9999999999999999.99", "9999999999999999.99"),
    ],
)
def test_money_text_is_exact(read_day, tmp_path, text, expected):
    put(tmp_path, day_file("a.csv"), orders_csv(f"1,7,{text},paid,2024-03-01,2024-03-01T10:00:00Z"))
    assert column(read_day(tmp_path), "amount") == [Decimal(expected)]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("12.345", "has more than 2 decimal places (never rounded)"),
        ("0.001", "has more than 2 decimal places"),
        ("12,34", "is not a decimal number"),
        ("1e3", "is not a decimal number"),
        ("twelve", "is not a decimal number"),
        ("12345678901234567.00", "does not fit"),
    ],
)
def test_money_is_never_rounded(read_day, tmp_path, text, rule):
    put(tmp_path, day_file("a.csv"), orders_csv(f'1,7,"{text}",paid,2024-03-01,{TEN}'))
    batch = read_day(tmp_path)
    assert batch.rows.num_rows == 0
    assert reasons(batch)[0].startswith(f"amount: value '{text}' {rule}")


def test_json_money_numbers(read_day, tmp_path):
    records = [
        order(1, amount=12.34),
        order(2, amount=12),
        order(3, amount="7.10"),
        order(4, amount=12.345),
        order(5, amount=0.1 + 0.2),
    ]
    put(tmp_path, day_file("a.jsonl"), jsonl(*records))
    batch = read_day(tmp_path)
    assert column(batch, "amount") == [Decimal("12.34"), Decimal("12.00"), Decimal("7.10")]
    assert all("more than 2 decimal places" in r for r in reasons(batch))


def test_empty_csv_fields_are_null(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv('1,,,"",2024-03-01,2024-03-01T10:00:00Z'))
    batch = read_day(tmp_path)
    [row] = batch.rows.to_pylist()
    assert row["customer_id"] is None and row["amount"] is None and row["status"] is None


def test_null_key_version_and_date_are_quarantined(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            ",7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z",
            "2,7,1.00,paid,2024-03-01,",
            "3,7,1.00,paid,,2024-03-01T10:00:00Z",
            "4,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z",
        ),
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [4]
    assert reasons(batch) == [
        "order_id: natural key is null or blank",
        "updated_at: version column is null, so newest-wins cannot order this row",
        "order_date: is null but must equal the partition folder date=2024-03-01",
    ]


def test_blank_string_key_is_quarantined(read_day, tmp_path):
    event = {
        "event_id": "  ",
        "customer_id": 1,
        "event_type": "checkout",
        "event_time": "2024-03-01T10:00:00Z",
        "ingested_at": "2024-03-01T10:00:01Z",
        "payload": "{}",
    }
    put(tmp_path, day_file("a.jsonl", "events"), jsonl(event, {**event, "event_id": "e-1"}))
    batch = read_day(tmp_path, EVENTS)
    assert column(batch, "event_id") == ["e-1"]
    assert reasons(batch) == ["event_id: natural key is null or blank"]


def test_date_outside_the_partition_folder(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv("1,7,1.00,paid,2024-03-02,2024-03-01T10:00:00Z"))
    batch = read_day(tmp_path)
    assert reasons(batch) == [
        "order_date: 2024-03-02 is outside the partition folder date=2024-03-01"
    ]
    assert batch.quarantine.column("partition_date").to_pylist() == [DAY]


def _strict(contract):
    """The contract with every value rule raised to severity quarantine."""
    return dataclasses.replace(
        contract,
        rules=tuple(dataclasses.replace(rule, severity="quarantine") for rule in contract.rules),
    )


def test_value_rules_load_rows_unless_they_quarantine(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "1,7,1.00,lost,2024-03-01,2024-03-01T10:00:00Z",
            "2,7,-0.01,paid,2024-03-01,2024-03-01T10:00:00Z",
            "3,7,1.00,PAID,2024-03-01,2024-03-01T10:00:00Z",
        ),
    )
    # The shipped rules are WARN checks: every row loads, values as they came.
    assert [r.severity for r in ORDERS.rules] == ["warn", "warn"]
    batch = read_day(tmp_path)
    assert column(batch, "status") == ["lost", "paid", "PAID"]
    assert batch.quarantine.num_rows == 0
    # Declared with severity quarantine, the same rules keep the rows out, with reasons.
    strict = read_day(tmp_path, _strict(ORDERS))
    allowed = "cancelled, delivered, paid, placed, refunded, shipped"
    assert reasons(strict) == [
        f"status: value 'lost' is not allowed (expected one of {allowed})",
        "amount: -0.01 is negative (must be >= 0)",
        f"status: value 'PAID' is not allowed (expected one of {allowed})",
    ]


def test_every_problem_of_a_row_is_named(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv("1,x,-5,lost,2024-03-02,2024-03-01T10:00:00Z"))
    [reason] = reasons(read_day(tmp_path))
    # The parse error is reported; rules on the other values wait until it is fixed.
    assert reason == "customer_id: value 'x' is not an integer like 12"
    put(tmp_path, day_file("a.csv"), orders_csv("1,7,-5,lost,2024-03-02,2024-03-01T10:00:00Z"))
    [reason] = reasons(read_day(tmp_path, _strict(ORDERS)))
    assert [part.split(":")[0] for part in reason.split("; ")] == ["order_date", "amount", "status"]


def test_oversized_csv_field_is_quarantined(read_day, tmp_path):
    big = "y" * (MAX_FIELD_BYTES + 10)
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(f"1,7,1.00,{big},2024-03-01,{TEN}", f"2,7,1.00,paid,2024-03-01,{TEN}"),
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [2]
    assert reasons(batch) == [
        f"status: value is {MAX_FIELD_BYTES + 10} bytes, over the "
        f"{MAX_FIELD_BYTES}-byte bound for one field"
    ]


def test_oversized_string_field_is_quarantined(read_day, tmp_path):
    big = "x" * (MAX_FIELD_BYTES + 1)
    event = {
        "event_id": "e-1",
        "customer_id": 1,
        "event_type": "checkout",
        "event_time": "2024-03-01T10:00:00Z",
        "ingested_at": "2024-03-01T10:00:01Z",
    }
    put(
        tmp_path,
        day_file("a.jsonl", "events"),
        jsonl({**event, "payload": big}, {**event, "event_id": "e-2", "payload": "ok"}),
    )
    batch = read_day(tmp_path, EVENTS)
    assert column(batch, "event_id") == ["e-2"]
    [reason] = reasons(batch)
    assert reason == (
        f"payload: value is {MAX_FIELD_BYTES + 1} bytes, over the "
        f"{MAX_FIELD_BYTES}-byte bound for one field"
    )
    raw = batch.quarantine.column("raw_record")[0].as_py()
    assert len(raw) < 2_000 and "more chars" in raw


def test_raw_record_holds_the_raw_values(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv("1,7,12.345,paid,2024-03-01,2024-03-01 10:00:00"))
    row = read_day(tmp_path).quarantine.to_pylist()[0]
    assert row["raw_record"] == (
        '{"order_id": "1", "customer_id": "7", "amount": "12.345", "status": "paid", '
        '"order_date": "2024-03-01", "updated_at": "2024-03-01 10:00:00"}'
    )
    assert (row["source"], row["source_file"], row["row_number"]) == (
        "orders",
        "orders/date=2024-03-01/a.csv",
        1,
    )
