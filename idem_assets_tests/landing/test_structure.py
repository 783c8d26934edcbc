"""Broken lines and broken files: quarantined per row, or a LandingFileError naming the file."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from idem_assets.landing import LandingFileError
from idem_assets.sample.sources import CUSTOMERS
from idem_assets_tests.landing.builders import (
    column,
    day_file,
    jsonl,
    order,
    orders_csv,
    parquet_bytes,
    put,
    reasons,
)

GOOD = "1,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z"


def _good(order_id: int) -> str:
    return GOOD.replace("1,", f"{order_id},", 1)


def test_csv_row_with_wrong_field_count_is_quarantined(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.csv"),
        orders_csv(_good(1), "2,7,1.00,paid,2024-03-01", _good(3), _good(4) + ",surplus"),
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 3]
    assert reasons(batch) == [
        "row has 5 fields but the header has 6 (line 3): check delimiters and quoting",
        "row has 7 fields but the header has 6 (line 5): check delimiters and quoting",
    ]
    assert batch.quarantine.column("row_number").to_pylist() == [2, 4]
    assert json.loads(batch.quarantine.column("raw_record")[0].as_py()) == [
        "2",
        "7",
        "1.00",
        "paid",
        "2024-03-01",
    ]


def test_csv_row_numbers_count_records_not_lines(read_day, tmp_path):
    header = "customer_id,name,email,segment,updated_at"
    put(
        tmp_path,
        day_file("a.csv", "customers"),
        f'{header}\n1,"two\nlines",a@x.org,smb,2024-03-01T10:00:00Z\n2,b,b@x.org,smb\n',
    )
    batch = read_day(tmp_path, CUSTOMERS)
    assert column(batch, "name") == ["two\nlines"]
    assert batch.quarantine.column("row_number").to_pylist() == [2]
    assert "(line 4)" in reasons(batch)[0]


def test_csv_row_with_invalid_utf8_is_quarantined(read_day, tmp_path):
    data = orders_csv(_good(1), "2,7,1.00,pa\udcffid,2024-03-01,2024-03-01T10:00:00Z", _good(3))
    put(tmp_path, day_file("a.csv"), data.encode("utf-8", "surrogateescape"))
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 3]
    assert reasons(batch) == ["row is not valid UTF-8 (line 3), re-export the file as UTF-8"]
    assert "pa\\\\xffid" in batch.quarantine.column("raw_record")[0].as_py()


def test_jsonl_lines_that_are_not_objects_or_not_json_are_quarantined(read_day, tmp_path):
    lines = [
        json.dumps(order(1)),
        "[1, 2]",
        "42",
        "null",
        '{"order_id": 5,',
        "not json",
        json.dumps(order(7)),
    ]
    put(tmp_path, day_file("a.jsonl"), "\n".join(lines) + "\n")
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 7]
    assert reasons(batch) == [
        "line 2 is a JSON array, not an object",
        "line 3 is a JSON number, not an object",
        "line 4 is a JSON null, not an object",
        "line 5 is not valid JSON: Expecting property name enclosed in double quotes at column 16",
        "line 6 is not valid JSON: Expecting value at column 1",
    ]
    assert batch.quarantine.column("row_number").to_pylist() == [2, 3, 4, 5, 6]
    assert json.loads(batch.quarantine.column("raw_record")[1].as_py()) == ["42"]


def test_jsonl_line_with_invalid_utf8_is_quarantined(read_day, tmp_path):
    bad_line = b'{"order_id": 2, "status": "\xff"}\n'
    data = jsonl(order(1)).encode() + bad_line + jsonl(order(3)).encode()
    put(tmp_path, day_file("a.jsonl"), data)
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 3]
    assert reasons(batch) == ["line 2 is not valid UTF-8 (byte offset 27), re-export as UTF-8"]


def test_jsonl_blank_lines_are_not_rows(read_day, tmp_path):
    text = "\n" + jsonl(order(1)) + "  \n\n" + jsonl(order(2, updated_at=None))
    put(tmp_path, day_file("a.jsonl"), text)
    batch = read_day(tmp_path)
    assert batch.raw_rows == 2
    assert batch.quarantine.column("row_number").to_pylist() == [2]


def test_jsonl_mixed_value_types_across_lines(read_day, tmp_path):
    put(
        tmp_path,
        day_file("a.jsonl"),
        jsonl(order(1, customer_id=5), order("2", customer_id="6"), order(3.0, customer_id=None)),
    )
    batch = read_day(tmp_path)
    assert column(batch, "order_id") == [1, 2, 3]
    assert column(batch, "customer_id") == [5, 6, None]


def test_truncated_parquet_raises_naming_the_file(read_day, tmp_path):
    data = parquet_bytes(pa.table({"order_id": pa.array(range(1000))}))
    put(tmp_path, day_file("ok.csv"), orders_csv(GOOD))
    put(tmp_path, day_file("broken.parquet"), data[: len(data) // 2])
    with pytest.raises(LandingFileError) as caught:
        read_day(tmp_path)
    assert caught.value.relpath == "orders/date=2024-03-01/broken.parquet"
    assert str(caught.value).startswith(
        "orders/date=2024-03-01/broken.parquet: not a readable Parquet file, truncated or corrupt"
    )


def test_garbage_with_parquet_suffix_raises(read_day, tmp_path):
    put(tmp_path, day_file("x.parquet"), b"this is not parquet at all")
    with pytest.raises(LandingFileError, match=r"x\.parquet: not a readable Parquet file"):
        read_day(tmp_path)


def test_unterminated_csv_quote_raises_naming_the_file_and_row(read_day, tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv(_good(1), '2,7,"1.00,paid,2024-03-01,x', _good(3)))
    with pytest.raises(LandingFileError) as caught:
        read_day(tmp_path)
    message = str(caught.value)
    assert message.startswith(
        "orders/date=2024-03-01/a.csv: unterminated quoted field in data "
        "row 2 (starting on line 3) swallows the rest of the file"
    )


def test_a_stray_quote_inside_a_field_is_just_a_character(read_day, tmp_path):
    header = "customer_id,name,email,segment,updated_at"
    put(
        tmp_path,
        day_file("a.csv", "customers"),
        f"{header}\n1,Jo 5'11\",j@x.org,smb,2024-03-01T10:00:00Z\n",
    )
    batch = read_day(tmp_path, CUSTOMERS)
    assert column(batch, "name") == ["Jo 5'11\""]
