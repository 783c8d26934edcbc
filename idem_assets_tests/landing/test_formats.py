"""Formats and file shapes: Parquet, CSV, JSON Lines, drift, extra and missing columns."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from idem_assets.landing import QUARANTINE_SCHEMA, read_days
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.landing.builders import (
    DAY,
    column,
    day_file,
    jsonl,
    order,
    orders_csv,
    parquet_bytes,
    put,
    reasons,
)

TEN_UTC = dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)


def _orders_table(**overrides: pa.Array) -> pa.Table:
    columns = {
        "order_id": pa.array([1, 2], pa.int64()),
        "customer_id": pa.array([7, 8], pa.int64()),
        "amount": pa.array([Decimal("12.34"), Decimal("5.00")], pa.decimal128(18, 2)),
        "status": pa.array(["paid", "placed"]),
        "order_date": pa.array([DAY, DAY], pa.date32()),
        "updated_at": pa.array([TEN_UTC, TEN_UTC], pa.timestamp("us", "UTC")),
    }
    columns.update(overrides)
    return pa.table(columns)


def test_one_day_mixes_parquet_csv_and_jsonl(read_day, tmp_path):
    put(tmp_path, day_file("a.parquet"), parquet_bytes(_orders_table()))
    put(tmp_path, day_file("b.csv"), orders_csv("3,9,1.50,shipped,2024-03-01,2024-03-01T10:00:00Z"))
    put(tmp_path, day_file("c.jsonl"), jsonl(order(4)))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 2, 3, 4]
    assert column(batch, "updated_at") == [TEN_UTC] * 4
    assert [f.format for f in batch.files] == ["parquet", "csv", "jsonl"]
    assert [f.rows for f in batch.files] == [2, 1, 1]
    assert batch.rows.schema == ORDERS.schema


def test_parquet_type_drift_is_normalised(read_day, tmp_path):
    berlin = pa.array([TEN_UTC, TEN_UTC], pa.timestamp("ms", "Europe/Berlin"))
    naive = pa.array([dt.datetime(2024, 3, 1, 10)] * 2, pa.timestamp("ns"))
    put(
        tmp_path,
        day_file("a.parquet"),
        parquet_bytes(
            _orders_table(
                order_id=pa.array([1, 2], pa.int32()),
                customer_id=pa.array([7.0, 8.0], pa.float64()),
                amount=pa.array([12.34, 5.0], pa.float64()),
                status=pa.array(["paid", "placed"]).dictionary_encode(),
                updated_at=berlin,
            )
        ),
    )
    put(
        tmp_path,
        day_file("b.parquet"),
        parquet_bytes(
            _orders_table(
                order_id=pa.array([3, 4], pa.uint16()),
                amount=pa.array([Decimal("1.2000"), Decimal("3.0000")], pa.decimal128(10, 4)),
                updated_at=naive,
            )
        ),
    )
    batch = read_day(tmp_path)
    assert batch.quarantine.num_rows == 0
    assert column(batch, "order_id") == [1, 2, 3, 4]
    assert column(batch, "customer_id") == [7, 8, 7, 8]
    assert column(batch, "amount") == [Decimal(v) for v in ("12.34", "5.00", "1.20", "3.00")]
    assert column(batch, "status") == ["paid", "placed", "paid", "placed"]
    assert column(batch, "updated_at") == [TEN_UTC] * 4


def test_parquet_values_that_would_lose_precision_are_quarantined(read_day, tmp_path):
    nanos = pa.array([1_709_287_200_000_000_001, 1_709_287_200_000_000_000], pa.int64()).cast(
        pa.timestamp("ns", "UTC")
    )
    put(
        tmp_path,
        day_file("a.parquet"),
        parquet_bytes(
            _orders_table(
                amount=pa.array([Decimal("1.2345"), Decimal("1.2300")], pa.decimal128(10, 4)),
                updated_at=nanos,
            )
        ),
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [2]
    [reason] = reasons(batch)
    assert reason.startswith("amount: value '1.2345' has more than 2 decimal places")
    assert "updated_at: value '2024-03-01 10:00:00.000000001" in reason
    assert "has sub-microsecond precision" in reason


def test_parquet_with_wrong_types_is_quarantined_per_row(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.parquet"),
        parquet_bytes(
            _orders_table(
                order_date=pa.array([TEN_UTC, None], pa.timestamp("us", "UTC")),
                status=pa.array([b"paid", b"\xff"], pa.binary()),
            )
        ),
    )
    batch = read_day(tmp_path)
    assert batch.rows.num_rows == 0
    first, second = reasons(batch)
    assert "order_date: got a timestamp value, expected a date (YYYY-MM-DD)" in first
    assert "status: binary value cannot be read as UTF-8 text" in second


def test_extra_columns_are_dropped_and_reported(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "1,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z,web,x",
            header="order_id,customer_id,amount,status,order_date,updated_at,channel,note",
        ),
    )
    put(tmp_path, day_file("b.jsonl"), jsonl(order(2, coupon="SPRING")))
    put(tmp_path, day_file("c.csv"), orders_csv("3,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z"))
    batch = read_day(tmp_path)
    assert batch.rows.column_names == ORDERS.columns
    assert column(batch, "order_id") == [1, 2, 3]
    assert batch.dropped_columns == {
        "orders/date=2024-03-01/a.csv": ("channel", "note"),
        "orders/date=2024-03-01/b.jsonl": ("coupon",),
    }


def test_columns_in_another_order_are_fine(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "2024-03-01T10:00:00Z,paid,1,2024-03-01,7,1.00",
            header="updated_at,status,order_id,order_date,customer_id,amount",
        ),
    )
    assert column(read_day(tmp_path), "order_id") == [1]


def test_missing_contract_column_quarantines_the_whole_file(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "1,7,paid,2024-03-01,2024-03-01T10:00:00Z",
            "2,7,paid,2024-03-01,2024-03-01T10:00:00Z",
            header="order_id,customer_id,status,order_date,updated_at",
        ),
    )
    put(tmp_path, day_file("b.jsonl"), jsonl({k: v for k, v in order(3).items() if k != "status"}))
    put(tmp_path, day_file("c.jsonl"), jsonl(order(4)))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [4]
    assert reasons(batch) == [
        "file lacks contract column(s) amount (it has: order_id, customer_id, status, "
        "order_date, updated_at)"
    ] * 2 + [
        "file lacks contract column(s) status (it has: order_id, customer_id, amount, "
        "order_date, updated_at)"
    ]
    assert batch.quarantine.column("source_file").to_pylist() == [
        "orders/date=2024-03-01/a.csv"
    ] * 2 + ["orders/date=2024-03-01/b.jsonl"]


def test_a_key_missing_from_some_json_lines_is_null_there(read_day, tmp_path):
    partial = {k: v for k, v in order(2).items() if k != "customer_id"}
    put(tmp_path, day_file("a.jsonl"), jsonl(order(1), partial))
    assert column(read_day(tmp_path), "customer_id") == [7, None]


def test_duplicate_contract_column_quarantines_the_file(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "1,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z,2.00",
            header=f"{'order_id,customer_id,amount,status,order_date,updated_at'},amount",
        ),
    )
    batch = read_day(tmp_path)
    [reason] = reasons(batch)
    assert reason.endswith("contract column(s) amount appear more than once")
    assert '"amount#2": "2.00"' in batch.quarantine.column("raw_record")[0].as_py()


def test_csv_quoting_bom_crlf_and_blank_lines(read_day, tmp_path):
    text = "\ufeff" + orders_csv(
        '1,7,"1.00","pa""id",2024-03-01,2024-03-01T10:00:00Z',
        "",
        "2,7,1.00,paid,,2024-03-01T10:00:00Z",
    )
    put(tmp_path, day_file("a.csv"), text.replace("\n", "\r\n"))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1]
    assert column(batch, "status") == ['pa"id']
    assert reasons(batch) == [
        "order_date: is null but must equal the partition folder date=2024-03-01"
    ]
    assert batch.quarantine.column("row_number").to_pylist() == [2]


def test_csv_quoted_newline_stays_in_its_field(read_day, tmp_path):
    header = "customer_id,name,email,segment,updated_at"
    put(
        tmp_path,
        day_file("a.csv", "customers"),
        f'{header}\n1,"Ada\nNovak",a@example.com,smb,2024-03-01T10:00:00Z\n'
        "2,Bo,b@example.com,smb,2024-03-01T10:00:00Z\n",
    )
    from idem_assets.sample.sources import CUSTOMERS

    batch = read_day(tmp_path, CUSTOMERS)
    assert column(batch, "name") == ["Ada\nNovak", "Bo"]


def test_files_with_other_suffixes_and_hidden_files_are_ignored_and_reported(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv("1,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z"))
    put(tmp_path, day_file("notes.txt"), "not data")
    put(tmp_path, day_file("b.csv.bz2"), b"BZh9")
    put(tmp_path, day_file(".c.csv.tmp"), "half written")
    put(tmp_path, day_file("_SUCCESS"), "")
    put(tmp_path, day_file("nested/d.csv"), orders_csv())
    put(
        tmp_path, day_file("UPPER.CSV"), orders_csv("2,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z")
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [2, 1]
    assert [f.relpath for f in batch.files] == [
        "orders/date=2024-03-01/UPPER.CSV",
        "orders/date=2024-03-01/a.csv",
    ]
    ignored = batch.ignored_files
    assert sorted(ignored) == [
        day_file(n) for n in (".c.csv.tmp", "_SUCCESS", "b.csv.bz2", "nested", "notes.txt")
    ]
    assert ignored[day_file("notes.txt")].startswith("unsupported suffix '.txt'")
    assert ignored[day_file("_SUCCESS")].startswith("hidden file")
    assert ignored[day_file("nested")].startswith("sub-folder")


def test_zero_byte_and_header_only_files_are_empty(read_day, tmp_path):
    for name in ("a.parquet", "b.csv", "c.jsonl"):
        put(tmp_path, day_file(name), b"")
    put(tmp_path, day_file("d.csv"), orders_csv())
    put(tmp_path, day_file("e.jsonl"), "\n\n")
    batch = read_day(tmp_path)
    assert batch.raw_rows == 0 and batch.rows.num_rows == 0
    assert [f.rows for f in batch.files] == [0] * 5
    assert [f.size for f in batch.files][:3] == [0, 0, 0]
    assert batch.notes[day_file("a.parquet")] == ("zero-byte file: read as 0 rows",)


def test_a_day_without_folder_or_files_is_a_valid_empty_day(read_day, tmp_path):
    (tmp_path / day_file("x")).parent.mkdir(parents=True)
    for day in (DAY, DAY + dt.timedelta(days=5)):
        batch = read_day(tmp_path, day=day)
        assert batch.rows.num_rows == 0 and batch.quarantine.num_rows == 0
        assert batch.files == () and batch.signature is None
        assert batch.rows.schema == ORDERS.schema
        assert batch.quarantine.schema == QUARANTINE_SCHEMA


def test_rows_come_out_by_relpath_then_row_number(tmp_path):
    day2 = DAY + dt.timedelta(days=1)
    put(
        tmp_path,
        day_file("b.csv"),
        orders_csv(
            "20,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z",
            "21,7,1.00,paid,2024-03-01,",
            "22,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z",
        ),
    )
    put(tmp_path, day_file("a.jsonl"), jsonl(order(11), order(10, updated_at=None), order(12)))
    put(
        tmp_path,
        day_file("a.csv", day=day2),
        orders_csv("30,7,1.00,paid,2024-03-02,", "31,7,1.00,paid,2024-03-02,2024-03-01T10:00:00Z"),
    )
    batch = read_days(tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=2))
    assert column(batch, "order_id") == [11, 12, 20, 22, 31]
    quarantine = batch.quarantine.select(["source_file", "row_number", "partition_date"])
    assert quarantine.to_pylist() == [
        {"source_file": day_file("a.jsonl"), "row_number": 2, "partition_date": DAY},
        {"source_file": day_file("b.csv"), "row_number": 2, "partition_date": DAY},
        {"source_file": day_file("a.csv", day=day2), "row_number": 1, "partition_date": day2},
    ]
    again = read_days(tmp_path, ORDERS, DAY, DAY + dt.timedelta(days=2))
    assert again.rows.equals(batch.rows) and again.quarantine.equals(batch.quarantine)


def test_the_reader_keeps_duplicates(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(
            "1,7,1.00,placed,2024-03-01,2024-03-01T10:00:00Z",
            "1,7,1.00,placed,2024-03-01,2024-03-01T10:00:00Z",
            "1,7,1.00,paid,2024-03-01,2024-03-01T11:00:00Z",
        ),
    )
    assert column(read_day(tmp_path), "status") == ["placed", "placed", "paid"]


def test_json_payload_objects_become_json_text(read_day, tmp_path):
    from idem_assets.sample.sources import EVENTS

    event = {
        "event_id": "e-1",
        "customer_id": 1,
        "event_type": "checkout",
        "event_time": "2024-03-01T10:00:00Z",
        "ingested_at": "2024-03-01T10:00:01Z",
        "payload": {"page": "/p/1", "items": [1, 2]},
    }
    put(
        tmp_path,
        day_file("a.jsonl", "events"),
        jsonl(event, {**event, "event_id": "e-2", "payload": "plain"}),
    )
    batch = read_day(tmp_path, EVENTS)
    assert column(batch, "payload") == ['{"page": "/p/1", "items": [1, 2]}', "plain"]


def test_parquet_nested_and_exotic_columns(read_day, tmp_path):
    from idem_assets.sample.sources import EVENTS

    table = pa.table(
        {
            "event_id": pa.array(["e-1", "e-2"]),
            "customer_id": pa.array([1, 2], pa.int64()),
            "event_type": pa.array(["checkout", "purchase"]),
            "event_time": pa.array([TEN_UTC, TEN_UTC], pa.timestamp("us", "UTC")),
            "ingested_at": pa.array([TEN_UTC, TEN_UTC], pa.timestamp("us", "UTC")),
            "payload": pa.array([{"page": "/p/1"}, {"page": None}]),
            "tags": pa.array([[("a", 1)], []], pa.map_(pa.string(), pa.int64())),
        }
    )
    put(tmp_path, day_file("a.parquet", "events"), parquet_bytes(table))
    batch = read_day(tmp_path, EVENTS)
    assert column(batch, "payload") == ['{"page":"/p/1"}', '{"page":null}']
    assert batch.dropped_columns == {day_file("a.parquet", "events"): ("tags",)}


def test_json_value_of_the_wrong_kind_is_quarantined(read_day, tmp_path):
    # Mixed kinds in one column: each value is judged by its JSON text.
    put(tmp_path, day_file("a.jsonl"), jsonl(order(1, amount={"value": 1}), order(2)))
    put(tmp_path, day_file("b.jsonl"), jsonl(order(3, order_date=20240301), order(4)))
    # One wrong kind for the whole column: judged by its type.
    put(tmp_path, day_file("c.jsonl"), jsonl(order(5, amount={"value": 1})))
    put(tmp_path, day_file("d.jsonl"), jsonl(order(6, order_date=20240301)))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [2, 4]
    assert reasons(batch) == [
        "amount: value '{\"value\": 1}' is not a decimal number like 12.34",
        "order_date: value '20240301' is not a date in the form YYYY-MM-DD",
        "amount: got an object value, expected a decimal number",
        "order_date: got an integer value, expected a date (YYYY-MM-DD)",
    ]
