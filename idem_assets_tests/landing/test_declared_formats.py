"""The formats real files use, read through declarations: spellings, zones, layouts, gzip."""

from __future__ import annotations

import datetime as dt
import gzip
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from idem_assets.landing import DayBeforeFirstDayError, LandingFileError, day_signature, list_days
from idem_assets.sources import Column, DailySource, LandingSource, PatternRule
from idem_assets_tests.landing.builders import parquet_bytes, put, reasons

DAY = dt.date(2024, 3, 1)
NEXT = DAY + dt.timedelta(days=1)
UTC = dt.UTC


def declared(*columns: Column, **fields: Any) -> DailySource:
    """A daily source ``feed`` keyed by ``id`` with a ``day`` partition date."""
    base = [Column(name="id", type="int64"), Column(name="day", type="date")]
    return DailySource(
        name="feed",
        first_day=DAY,
        columns=(*base, *columns),
        natural_key=("id",),
        partition_date="day",
        **fields,
    )


def csv(header: str, *lines: str, sep: str = ",") -> str:
    """CSV text with ``header`` (comma-separated names) in the given delimiter."""
    return "".join(f"{line}\n" for line in (header.replace(",", sep), *lines))


def values(batch, name: str) -> list:
    return batch.rows.column(name).to_pylist()


# --- timestamps ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01T10:00:00+0000", dt.datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T12:00:00+0200", dt.datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T15:30:00+05", dt.datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
        ("2024-03-01 10:00:00 +0000", dt.datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01 10:00:00Z", dt.datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T10:00:00.Z", dt.datetime(2024, 3, 1, 10, tzinfo=UTC)),
        ("2024-03-01T10:00:00,25Z", dt.datetime(2024, 3, 1, 10, 0, 0, 250_000, tzinfo=UTC)),
        ("2024-03-01T10:00:00.123456789Z", None),
        (
            "2024-03-01T10:00:00.123456000-0130",
            dt.datetime(2024, 3, 1, 11, 30, 0, 123_456, tzinfo=UTC),
        ),
    ],
)
def test_iso_timestamps_with_every_offset_spelling(read_day, tmp_path, text, expected):
    source = declared(Column(name="at", type="timestamp"))
    put(tmp_path, "feed/date=2024-03-01/a.csv", csv("id,day,at", f'1,2024-03-01,"{text}"'))
    batch = read_day(tmp_path, source.contract())
    if expected is None:
        assert reasons(batch) == [f"at: value '{text}' has sub-microsecond precision"]
    else:
        assert values(batch, "at") == [expected] and batch.quarantine.num_rows == 0


def test_naive_timestamps_are_read_in_the_declared_zone(read_day, tmp_path):
    source = declared(Column(name="at", type="timestamp"), timezone="Europe/Berlin")
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv(
            "id,day,at",
            "1,2024-03-01,2024-01-15 12:00:00",  # winter: +01:00
            "2,2024-03-01,2024-07-15T12:00:00",  # summer: +02:00
            "3,2024-03-01,2024-03-31 02:30:00",  # spring forward: does not exist
            "4,2024-03-01,2024-10-27 02:30:00",  # fall back: occurs twice, the first wins
            "5,2024-03-01,2024-07-15T12:00:00Z",  # an explicit offset is not re-zoned
        ),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "id") == [1, 2, 4, 5]
    assert values(batch, "at") == [
        dt.datetime(2024, 1, 15, 11, tzinfo=UTC),
        dt.datetime(2024, 7, 15, 10, tzinfo=UTC),
        dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC),
        dt.datetime(2024, 7, 15, 12, tzinfo=UTC),
    ]
    assert reasons(batch) == [
        "at: value '2024-03-31 02:30:00' does not exist in Europe/Berlin (a daylight-saving gap)"
    ]


def test_naive_parquet_timestamps_are_read_in_the_declared_zone(read_day, tmp_path):
    source = declared(Column(name="at", type="timestamp"), timezone="America/New_York")
    table = pa.table(
        {
            "id": [1],
            "day": [DAY],
            "at": pa.array([dt.datetime(2024, 3, 1, 9, 0)], pa.timestamp("ms")),
        }
    )
    put(tmp_path, "feed/date=2024-03-01/a.parquet", parquet_bytes(table))
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "at") == [dt.datetime(2024, 3, 1, 14, tzinfo=UTC)]


def test_epoch_seconds_and_milliseconds(read_day, tmp_path):
    source = declared(
        Column(name="s", type="timestamp", epoch="seconds"),
        Column(name="ms", type="timestamp", epoch="milliseconds"),
    )
    put(
        tmp_path,
        "feed/date=2024-03-01/a.jsonl",
        '{"id": 1, "day": "2024-03-01", "s": 1709287200, "ms": 1709287200123}\n'
        '{"id": 2, "day": "2024-03-01", "s": "1709287200.5", "ms": "1709287200123.456"}\n'
        '{"id": 3, "day": "2024-03-01", "s": -1, "ms": null}\n'
        '{"id": 4, "day": "2024-03-01", "s": "2024-03-01T10:00:00Z", "ms": 1}\n'
        '{"id": 5, "day": "2024-03-01", "s": 1e20, "ms": "1.0001"}\n',
    )
    batch = read_day(tmp_path, source.contract())
    base = dt.datetime(2024, 3, 1, 10, tzinfo=UTC)
    assert values(batch, "id") == [1, 2, 3]
    assert values(batch, "s") == [
        base,
        base + dt.timedelta(milliseconds=500),
        dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    ]
    assert values(batch, "ms") == [
        base + dt.timedelta(milliseconds=123),
        base + dt.timedelta(milliseconds=123, microseconds=456),
        None,
    ]
    rule = (
        "is not epoch seconds within years 1-9999 (an integer, or a decimal with at most "
        "6 fraction digits)"
    )
    assert reasons(batch)[0] == f"s: value '2024-03-01T10:00:00Z' {rule}"
    # JSON numbers are judged by their JSON text (1e20 is read as a float).
    assert reasons(batch)[1].startswith("s: value '100000000000000000000' is not epoch seconds")
    assert "ms: value '1.0001' is not epoch milliseconds" in reasons(batch)[1]


def test_epoch_parquet_integers(read_day, tmp_path):
    source = declared(Column(name="ms", type="timestamp", epoch="milliseconds"))
    table = pa.table(
        {"id": [1, 2], "day": [DAY, DAY], "ms": pa.array([1709287200000, 2**62], pa.int64())}
    )
    put(tmp_path, "feed/date=2024-03-01/a.parquet", parquet_bytes(table))
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "ms") == [dt.datetime(2024, 3, 1, 10, tzinfo=UTC)]
    assert reasons(batch)[0].startswith(f"ms: value '{2**62}' is not epoch milliseconds")


# --- numbers ------------------------------------------------------------------------------


def test_decimal_comma_and_thousands_dot_load_when_declared(read_day, tmp_path):
    columns = (
        Column(name="amount", type="decimal(18,2)"),
        Column(name="qty", type="int64"),
        Column(name="rate", type="float64"),
    )
    source = declared(*columns, numbers={"decimal": ",", "thousands": "."}, csv={"delimiter": ";"})
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv(
            "id,day,amount,qty,rate",
            "1;2024-03-01;1.234,50;1.234;0,5",
            "2;2024-03-01;-12,3;12;1,5e3",
            "3;2024-03-01;12.34;7;1",  # a dot is a thousands separator here: not 12.34
            "4;2024-03-01;1.234.567,891;1;1",  # three decimals: never rounded
            sep=";",
        ),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "id") == [1, 2]
    assert values(batch, "amount") == [Decimal("1234.50"), Decimal("-12.30")]
    assert values(batch, "qty") == [1234, 12]
    assert values(batch, "rate") == [0.5, 1500.0]
    assert reasons(batch) == [
        "amount: value '12.34' is not a decimal number like 1.234,34",
        "amount: value '1.234.567,891' has more than 2 decimal places (never rounded)",
    ]


def test_decimal_comma_without_a_declaration_names_the_setting(read_day, tmp_path):
    source = declared(Column(name="amount", type="decimal(18,2)"))
    put(tmp_path, "feed/date=2024-03-01/a.csv", csv("id,day,amount", '1,2024-03-01,"1.234,50"'))
    [reason] = reasons(read_day(tmp_path, source.contract()))
    assert reason == (
        "amount: value '1.234,50' is not a decimal number like 12.34 (if the source writes "
        "decimal commas or thousands separators, declare them, e.g. numbers: {decimal: ',', "
        "thousands: '.'})"
    )


def test_thousands_comma_with_decimal_point(read_day, tmp_path):
    source = declared(Column(name="amount", type="decimal(12,2)"), numbers={"thousands": ","})
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv(
            "id,day,amount",
            '1,2024-03-01,"1,234,567.25"',
            "2,2024-03-01,999.5",
            '3,2024-03-01,"12,34"',
        ),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "amount") == [Decimal("1234567.25"), Decimal("999.50")]
    assert reasons(batch) == ["amount: value '12,34' is not a decimal number like 1,234.34"]


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("int32", "2147483647", 2147483647),
        ("int32", "2147483648", "is outside int32"),
        ("float64", "-1.5e-3", -0.0015),
        ("float64", "nan", "is not a number like 12.5"),
        ("bool", "TRUE", True),
        ("bool", "no", False),
        ("bool", "0", False),
        ("bool", "maybe", "is not a boolean (true/1/yes/false/0/no)"),
        ("decimal(15,2)", "1234567890123.45", Decimal("1234567890123.45")),
        ("decimal(15,2)", "12345678901234.5", "does not fit decimal128(15, 2)"),
        ("decimal(10,0)", "42", Decimal(42)),
        ("decimal(10,0)", "42.5", "has more than 0 decimal"),
    ],
)
def test_declared_column_types(read_day, tmp_path, kind, text, expected):
    source = declared(Column(name="v", type=kind))
    put(tmp_path, "feed/date=2024-03-01/a.csv", csv("id,day,v", f"1,2024-03-01,{text}"))
    batch = read_day(tmp_path, source.contract())
    if isinstance(expected, str):
        assert reasons(batch)[0].startswith(f"v: value '{text}' {expected}")
    else:
        assert values(batch, "v") == [expected]


# --- files --------------------------------------------------------------------------------


def test_semicolon_spreadsheet_export_with_bom_crlf_and_quotes(read_day, tmp_path):
    source = declared(
        Column(name="name", type="string"),
        Column(name="price", type="decimal(9,2)"),
        csv={"delimiter": "semicolon"},
        numbers={"decimal": ","},
    )
    text = '\ufeffid;day;name;price\r\n1;2024-03-01;"Müller; Söhne";"3,50"\r\n2;2024-03-01;x;4\r\n'
    put(tmp_path, "feed/date=2024-03-01/export.csv", text)
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "name") == ["Müller; Söhne", "x"]
    assert values(batch, "price") == [Decimal("3.50"), Decimal("4.00")]


def test_tab_delimited_csv(read_day, tmp_path):
    source = declared(Column(name="name", type="string"), csv={"delimiter": "tab"})
    put(tmp_path, "feed/date=2024-03-01/a.csv", "id\tday\tname\n1\t2024-03-01\ta, b\n")
    assert values(read_day(tmp_path, source.contract()), "name") == ["a, b"]


def test_gzip_csv_and_jsonl_are_read_and_hashed_as_delivered(read_day, tmp_path):
    source = declared(Column(name="name", type="string"))
    raw = csv("id,day,name", "1,2024-03-01,a").encode()
    put(tmp_path, "feed/date=2024-03-01/a.csv.gz", gzip.compress(raw, mtime=0))
    put(
        tmp_path,
        "feed/date=2024-03-01/b.jsonl.GZ",
        gzip.compress(b'{"id": 2, "day": "2024-03-01", "name": "b"}\n', mtime=0),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "name") == ["a", "b"]
    assert [f.format for f in batch.files] == ["csv", "jsonl"]
    assert batch.files[0].size == (tmp_path / "feed/date=2024-03-01/a.csv.gz").stat().st_size


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff", "not a readable gzip file"),
        (b"id,day\n1,2024-03-01\n", "not a readable gzip file"),
        # mtime=0: the same bytes in every collecting process (xdist workers compare ids).
        (gzip.compress(b"id,day\n" * 1000, mtime=0)[:40], "gzip stream is truncated"),
        (gzip.compress(b"\0" * (70 << 20), mtime=0), "refused as a likely gzip bomb"),
    ],
    ids=["not-gzip-header", "plain-text", "truncated", "bomb"],
)
def test_broken_gzip_files_fail_with_a_clear_error(read_day, tmp_path, data, problem):
    source = declared()
    put(tmp_path, "feed/date=2024-03-01/a.csv.gz", data)
    with pytest.raises(LandingFileError, match=problem) as raised:
        read_day(tmp_path, source.contract())
    assert raised.value.relpath == "feed/date=2024-03-01/a.csv.gz"


def test_parquet_dictionary_large_string_and_nested_columns(read_day, tmp_path):
    source = declared(
        Column(name="label", type="string"),
        Column(name="detail", type="string"),
        Column(name="big", type="string"),
    )
    table = pa.table(
        {
            "id": [1, 2],
            "day": [DAY, DAY],
            "label": pa.array(["x", "y"]).dictionary_encode(),
            "detail": pa.array(
                [{"a": 1, "b": [1, 2]}, None],
                pa.struct([("a", pa.int64()), ("b", pa.list_(pa.int64()))]),
            ),
            "big": pa.array(["long", "text"], pa.large_string()),
            "extra": pa.array([{"k": "v"}, {"k": "w"}], pa.struct([("k", pa.string())])),
        }
    )
    put(tmp_path, "feed/date=2024-03-01/a.parquet", parquet_bytes(table))
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "label") == ["x", "y"]
    assert values(batch, "detail") == ['{"a":1,"b":[1,2]}', None]
    assert values(batch, "big") == ["long", "text"]
    assert batch.dropped_columns == {"feed/date=2024-03-01/a.parquet": ("extra",)}


@pytest.mark.parametrize(
    ("layout", "folder", "next_folder"),
    [
        ("{source}/{yyyy}/{mm}/{dd}", "feed/2024/03/01", "feed/2024/03/02"),
        ("{source}/dt={date}", "feed/dt=2024-03-01", "feed/dt=2024-03-02"),
        (
            "exports/{source}/day_{date}",
            "exports/feed/day_2024-03-01",
            "exports/feed/day_2024-03-02",
        ),
    ],
)
def test_layouts(read_day, tmp_path, layout, folder, next_folder):
    contract = declared(layout=layout).contract()
    put(tmp_path, f"{folder}/a.csv", csv("id,day", "1,2024-03-01", "2,2024-03-02"))
    put(tmp_path, f"{next_folder}/b.csv", csv("id,day", "3,2024-03-02"))
    put(tmp_path, f"{folder.rsplit('/', 1)[0]}/not-a-day/c.csv", csv("id,day", "4,2024-03-01"))
    assert list_days(tmp_path, contract) == [DAY, NEXT]
    batch = read_day(tmp_path, contract)
    assert values(batch, "id") == [1]
    [bad] = batch.quarantine.to_pylist()
    assert bad["source_file"] == f"{folder}/a.csv" and bad["partition_date"] == DAY
    assert batch.day_signatures() == {DAY: day_signature(tmp_path, contract, DAY)}


def test_renamed_columns_and_a_file_lacking_one(read_day, tmp_path):
    source = declared(Column(name="amount", type="decimal(18,2)", **{"from": "Amount EUR"}))
    rename = LandingSource.model_validate(
        {
            **source.model_dump(by_alias=True, exclude={"columns"}),
            "columns": [
                {"name": "id", "type": "int64", "from": "OrderID"},
                {"name": "day", "type": "date", "from": "Date"},
                {"name": "amount", "type": "decimal(18,2)", "from": "Amount EUR"},
            ],
        }
    )
    contract = rename.contract()
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv("OrderID,Date,Amount EUR,id", "1,2024-03-01,2.50,99"),
    )
    put(tmp_path, "feed/date=2024-03-01/b.csv", csv("OrderID,Date,amount", "2,2024-03-01,1"))
    batch = read_day(tmp_path, contract)
    assert values(batch, "id") == [1] and values(batch, "amount") == [Decimal("2.50")]
    assert batch.dropped_columns == {
        "feed/date=2024-03-01/a.csv": ("id",),
        "feed/date=2024-03-01/b.csv": ("amount",),
    }
    assert reasons(batch) == [
        "file lacks contract column(s) Amount EUR (for amount) (it has: OrderID, Date, amount)"
    ]


def test_non_nullable_columns_and_a_declared_field_bound(read_day, tmp_path):
    source = declared(Column(name="name", type="string", nullable=False), max_field_bytes=12)
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv("id,day,name", "1,2024-03-01,ok", "2,2024-03-01,", "3,2024-03-01,far too long!!"),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "id") == [1]
    assert reasons(batch) == [
        "name: is null but the column is declared not nullable",
        "name: value is 14 bytes, over the 12-byte bound for one field",
    ]


def test_days_before_the_first_day_are_an_error_that_says_what_to_change(read_day, tmp_path):
    contract = declared().contract()
    with pytest.raises(DayBeforeFirstDayError) as raised:
        read_day(tmp_path, contract, day=DAY - dt.timedelta(days=2))
    assert str(raised.value) == (
        "feed: day(s) 2024-02-28 are before the source's first partition day 2024-03-01: they "
        "are not partitions of its asset. Set first_day in the source's declaration to an "
        "earlier day to load them"
    )


def test_a_pattern_rule_with_braces_quarantines_with_its_pattern_in_the_reason(read_day, tmp_path):
    rule = PatternRule(pattern="[A-Z]{2}-\\d{3}", severity="quarantine")
    source = declared(Column(name="code", type="string", rules=(rule,)))
    put(
        tmp_path,
        "feed/date=2024-03-01/a.csv",
        csv("id,day,code", "1,2024-03-01,AB-123", "2,2024-03-01,ab-123", "3,2024-03-01,AB-1234"),
    )
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "id") == [1]
    assert reasons(batch) == [
        r"code: value 'ab-123' does not match [A-Z]{2}-\d{3}",
        r"code: value 'AB-1234' does not match [A-Z]{2}-\d{3}",
    ]


def test_typed_parquet_values_ignore_the_text_spelling_and_lists_become_json(read_day, tmp_path):
    source = declared(
        Column(name="qty", type="int64"),
        Column(name="tags", type="string"),
        numbers={"decimal": ",", "thousands": "."},
    )
    table = pa.table(
        {
            "id": [1, 2],
            "day": [DAY, DAY],
            "qty": pa.array([Decimal("12.00"), Decimal("3.00")], pa.decimal128(9, 2)),
            "tags": pa.array([["a", "b"], None], pa.list_(pa.string())),
        }
    )
    put(tmp_path, "feed/date=2024-03-01/a.parquet", parquet_bytes(table))
    batch = read_day(tmp_path, source.contract())
    assert values(batch, "qty") == [12, 3]
    assert values(batch, "tags") == ['["a","b"]', None]
