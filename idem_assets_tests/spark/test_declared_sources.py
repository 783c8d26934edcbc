"""Declared sources read on Spark exactly as the local reader reads them.

One declaration in the shapes real exports take: an ERP writing ``;``-separated CSV with
decimal commas, partly gzip-compressed, into ``{source}/{yyyy}/{mm}/{dd}`` folders, with
German column names, Berlin wall-clock times, offsets of every spelling and epoch
columns; a tracking system writing (gzip) JSON Lines with JSON numbers; Parquet exports
with narrow and naive types. Every test compares ``read_landing_spark`` with
``read_days`` on the same files: valid rows and their fingerprint, quarantine rows and
their reasons (the wordings docs/spark.md lists as different are normalised).
"""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from idem_assets.landing import DayBeforeFirstDayError, read_days
from idem_assets.sources import (
    AllowedRule,
    Column,
    DailySource,
    NonNegativeRule,
    PatternRule,
    RangeRule,
)
from idem_assets.spark.landing import read_landing_spark
from idem_assets_tests.landing.builders import parquet_bytes, put
from idem_assets_tests.spark.parity import assert_same_read

pytestmark = pytest.mark.spark
SPRING = dt.date(2024, 3, 31)  # Berlin clocks jump from 02:00 to 03:00
AUTUMN = dt.date(2024, 10, 27)  # Berlin clocks fall back from 03:00 to 02:00
MAX_NOTE_BYTES = 64

SHIPMENTS = DailySource(
    name="shipments",
    layout="{source}/{yyyy}/{mm}/{dd}",
    first_day=dt.date(2024, 3, 1),
    timezone="Europe/Berlin",
    csv={"delimiter": "semicolon"},
    numbers={"decimal": ",", "thousands": "."},
    max_field_bytes=MAX_NOTE_BYTES,
    columns=(
        Column(name="shipment_id", type="int64", from_="Sendung"),
        Column(name="parcels", type="int32", from_="Pakete"),
        Column(
            name="weight_kg",
            type="float64",
            from_="Gewicht",
            rules=(RangeRule(min=0, max=1000, severity="quarantine"),),
        ),
        Column(name="fragile", type="bool"),
        Column(
            name="amount",
            type="decimal(15,2)",
            from_="Betrag",
            rules=(NonNegativeRule(severity="quarantine"),),
        ),
        Column(
            name="carrier",
            type="string",
            nullable=False,
            rules=(AllowedRule(allowed=("dhl", "dpd", "ups")),),
        ),  # warn: loaded, then checked
        Column(
            name="tracking",
            type="string",
            # (no {n} quantifier: the local reader's reason cannot hold braces yet)
            rules=(PatternRule(pattern=r"[A-Z]+\d+", severity="quarantine"),),
        ),
        Column(name="ship_date", type="date"),
        Column(name="shipped_at", type="timestamp"),  # Berlin wall clock
        Column(
            name="updated_at",
            type="timestamp",
            rules=(RangeRule(min="2024-01-01T00:00:00Z", severity="quarantine"),),
        ),
        Column(name="scanned_at", type="timestamp", epoch="seconds"),
        Column(name="delivered_at", type="timestamp", epoch="milliseconds"),
        Column(name="note", type="string"),
    ),
    natural_key=("shipment_id",),
    version="updated_at",
    partition_date="ship_date",
)
CONTRACT = SHIPMENTS.contract()
FILE_COLUMNS = [CONTRACT.file_name(c) for c in CONTRACT.columns]
HEADER = ";".join([*FILE_COLUMNS, "Lager"])  # plus an extra column, dropped

EPOCH_S, EPOCH_MS = "1711843200", "1711843200123"  # 2024-03-31T00:00:00Z (.123)


def _row(shipment: str, **values: str) -> str:
    """One ERP CSV line: a valid shipment of SPRING, with the given fields replaced."""
    fields = {
        "Sendung": shipment,
        "Pakete": "2",
        "Gewicht": "12,5",
        "fragile": "yes",
        "Betrag": "1.234,50",
        "carrier": "dhl",
        "tracking": "AB123456",
        "ship_date": SPRING.isoformat(),
        "shipped_at": "2024-03-31 01:30:00",
        "updated_at": "2024-03-31T10:00:00Z",
        "scanned_at": EPOCH_S,
        "delivered_at": EPOCH_MS,
        "note": "ok",
        "Lager": "Nord",
    }
    fields.update(values)
    return ";".join(fields.values())


def _csv(*lines: str, header: str = HEADER) -> bytes:
    return "".join(f"{line}\n" for line in (header, *lines)).encode("utf-8")


def _jsonl(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")


def _folder(day: dt.date) -> str:
    return f"shipments/{day:%Y/%m/%d}"


def _read_both(spark, landing: Path, day: dt.date):
    end = day + dt.timedelta(days=1)
    return (
        read_landing_spark(spark, landing, CONTRACT, day, end).persist(),
        read_days(landing, CONTRACT, day, end),
    )


def _erp_export(landing: Path) -> None:
    """The ERP's CSV exports of SPRING: gzip and plain, `;`-separated, decimal commas."""
    put(
        landing,
        f"{_folder(SPRING)}/export-1.csv.gz",
        gzip.compress(
            _csv(
                _row("1"),
                _row("2", carrier="fedex", Betrag="12,00", fragile="0"),  # WARN rule: loaded
                _row("3", shipped_at="2024-03-31 02:30:00"),  # in the spring-forward gap
                _row("4", Pakete="3000000000"),  # beyond int32
                _row("5", Betrag="-5,00"),  # quarantine rule: non_negative
                _row("6", Gewicht="1.500"),  # thousands separator: 1500 kg, over the range
                _row("7", tracking="ab12"),  # quarantine rule: pattern
                _row("8", carrier=""),  # declared not nullable
                _row("9", updated_at="2024-03-31T12:00:00.123456000+05"),  # 9 digits, +hh
                _row("10", updated_at="2024-03-31 12:00:00 +0000"),  # space, +hhmm
                _row("11", updated_at="2024-03-31T12:00:00.123456789Z"),  # sub-microsecond
                _row("12", updated_at="2023-12-31T23:00:00Z"),  # quarantine rule: range
                _row("13", note="x" * (MAX_NOTE_BYTES + 1)),  # over the declared field bound
                _row("14", fragile="ja"),  # not a boolean spelling
                _row("15", Betrag="12,345"),  # a third decimal: never rounded
                _row("16", Betrag="1.234.567.890.123,45"),  # 13 integer digits: fits (15,2)
                _row("17", Betrag="12.345.678.901.234,00"),  # 14 integer digits: does not fit
                _row("18", scanned_at="abc", delivered_at="1711843200123.4567"),
                _row("19", ship_date="2024-03-30"),  # not the folder's day
                _row("20", Betrag="1,234.50"),  # the other spelling: not a number here
                _row(
                    "1.021", Pakete="2,0", Gewicht="2,5e2", fragile="TRUE"
                ),  # grouped id, 2,0 parcels
                _row("22", scanned_at="1711843200.5", delivered_at="1711843200123.456"),
                _row("23", updated_at="2024-03-31 12:00:00,5 Z"),  # comma fraction, space, Z
                _row("24", shipped_at="2024-03-31 03:00:00", Gewicht="abc"),
                "25;2",  # too few fields
            )
        ),
    )
    put(
        landing,
        f"{_folder(SPRING)}/export-2.csv",
        _csv(
            _row("26", updated_at="2024-03-31T12:00:00+02:00"),
            _row("1", updated_at="2024-03-31T11:00:00Z", Betrag="99,99"),  # a newer version
        ),
    )
    # A file without one of the renamed columns: every row is quarantined, naming it.
    lacking = [c for c in FILE_COLUMNS if c != "Gewicht"]
    put(
        landing,
        f"{_folder(SPRING)}/export-3.csv",
        _csv(";".join(["27", *("2" for _ in lacking[1:])]), header=";".join(lacking)),
    )


def test_erp_csv_exports_with_decimal_commas_and_berlin_times(spark, tmp_path):
    _erp_export(tmp_path)
    batch, local = _read_both(spark, tmp_path, SPRING)
    quarantine = assert_same_read(batch, local)
    by_id = {r["shipment_id"]: r for r in batch.rows.toArrow().to_pylist()}
    assert {1, 2, 9, 10, 16, 22, 23, 26, 1021} <= set(by_id)
    assert by_id[2]["carrier"] == "fedex"  # a WARN rule never quarantines
    assert by_id[16]["amount"] == decimal.Decimal("1234567890123.45")
    assert by_id[1021]["parcels"] == 2 and by_id[1021]["weight_kg"] == 250.0
    utc = dt.UTC
    assert by_id[9]["updated_at"] == dt.datetime(2024, 3, 31, 7, 0, 0, 123456, tzinfo=utc)
    assert by_id[22]["scanned_at"] == dt.datetime(2024, 3, 31, 0, 0, 0, 500000, tzinfo=utc)
    assert by_id[22]["delivered_at"] == dt.datetime(2024, 3, 31, 0, 0, 0, 123456, tzinfo=utc)
    # 01:30 in Berlin is still winter time (+01:00).
    assert by_id[1]["shipped_at"] == dt.datetime(2024, 3, 31, 0, 30, tzinfo=utc)
    reasons = {r["reason"] for r in quarantine}
    assert (
        "shipped_at: value '2024-03-31 02:30:00' does not exist in Europe/Berlin "
        "(a daylight-saving gap)"
    ) in reasons
    assert "amount: -5.00 is negative (must be >= 0)" in reasons
    assert "weight_kg: 1500.0 is outside the range (0.0 <= weight_kg <= 1000.0)" in reasons
    assert (
        "updated_at: 2023-12-31 23:00:00.000000+00:00 is outside the range "
        "(updated_at >= 2024-01-01T00:00:00Z)"
    ) in reasons
    assert "carrier: is null but the column is declared not nullable" in reasons
    assert "parcels: value '3000000000' is outside int32" in reasons
    assert any(
        r.startswith("file lacks contract column(s) Gewicht (for weight_kg)") for r in reasons
    )
    gap = next(r for r in quarantine if "daylight-saving gap" in r["reason"])
    assert gap["source_file"] == f"{_folder(SPRING)}/export-1.csv.gz"
    assert gap["partition_date"] == SPRING
    assert batch.dropped_columns[f"{_folder(SPRING)}/export-1.csv.gz"] == ("Lager",)
    batch.unpersist()


def _scan(shipment: int, **values: Any) -> dict[str, Any]:
    """One tracking-system record (JSON numbers where the system writes numbers)."""
    record = {
        "Sendung": shipment,
        "Pakete": 1,
        "Gewicht": 12.5,
        "fragile": True,
        "Betrag": 1234.5,
        "carrier": "ups",
        "tracking": "JS000001",
        "ship_date": SPRING.isoformat(),
        "shipped_at": "2024-03-31 04:00:00",
        "updated_at": "2024-03-31T10:00:00.5Z",
        "scanned_at": int(EPOCH_S),
        "delivered_at": int(EPOCH_MS),
        "note": None,
    }
    record.update(values)
    return record


def test_tracking_json_lines_with_numbers_and_text_in_the_declared_spelling(spark, tmp_path):
    # JSON numbers are numbers whatever the declared separators; text keeps its spelling.
    put(
        tmp_path,
        f"{_folder(SPRING)}/scans.jsonl.gz",
        gzip.compress(
            _jsonl(
                _scan(40),
                _scan(41, Betrag=99.99, Gewicht=1e3, fragile=False, Pakete=7),
                _scan(42, Betrag=12.345),  # a third decimal
                _scan(43, Betrag=-1.5),  # quarantine rule
                _scan(44, Pakete=3000000000),  # beyond int32
                _scan(45, Gewicht=1000.5),  # over the range
                _scan(46, scanned_at=-62135596801),  # before year 1
                _scan(47, Betrag=12345678.5, note="ü" * 40),  # 80 bytes: over the bound
                _scan(48, shipped_at="2024-03-31 02:15:00"),  # in the gap
                _scan(49, carrier="dhl", updated_at="2024-03-31T12:00:00+05:30"),
                _scan(50, Betrag=0.1 + 0.2),  # 0.30000000000000004: never rounded
            )
        ),
    )
    put(
        tmp_path,
        f"{_folder(SPRING)}/scans-text.jsonl",
        _jsonl(
            _scan(
                60,
                Betrag="1.234,50",
                Gewicht="0,5",
                Pakete="3",
                fragile="no",
                scanned_at="1711843200",
                delivered_at="1711843200123",
            ),
            _scan(
                61,
                Betrag="1234.50",
                Gewicht="0,25",
                Pakete="4",
                fragile="yes",
                scanned_at="1711843200.25",
                delivered_at="x",
            ),
        ),
    )
    batch, local = _read_both(spark, tmp_path, SPRING)
    quarantine = assert_same_read(batch, local)
    by_id = {r["shipment_id"]: r for r in batch.rows.toArrow().to_pylist()}
    assert by_id[40]["amount"] == decimal.Decimal("1234.50")
    assert by_id[41]["weight_kg"] == 1000.0 and by_id[41]["parcels"] == 7
    assert by_id[60]["amount"] == decimal.Decimal("1234.50")
    reasons = " | ".join(r["reason"] for r in quarantine)
    assert "amount: value '1234.50' is not a decimal number like " in reasons
    assert "amount: value '0.30000000000000004' has more than 2 decimal places" in reasons
    assert "note: value is 80 bytes, over the 64-byte bound for one field" in reasons
    batch.unpersist()


def _parquet_exports(landing: Path) -> None:
    """Parquet exports of both DST days: narrow types, naive Berlin times, epoch integers."""

    def table(day: dt.date, rows: list[dict[str, Any]], amount: pa.DataType) -> pa.Table:
        types = {
            "Sendung": pa.int64(),
            "Pakete": pa.int32(),
            "Gewicht": pa.float64(),
            "fragile": pa.bool_(),
            "Betrag": amount,
            "carrier": pa.string(),
            "tracking": pa.string(),
            "ship_date": pa.date32(),
            "shipped_at": pa.timestamp("us"),
            "updated_at": pa.timestamp("ms", "Europe/Berlin"),
            "scanned_at": pa.int64(),
            "delivered_at": pa.int64(),
            "note": pa.string(),
        }
        base = {
            "Pakete": 1,
            "Gewicht": 0.25,
            "fragile": False,
            "Betrag": decimal.Decimal("10.50"),
            "carrier": "dpd",
            "tracking": "PQ000001",
            "ship_date": day,
            "updated_at": dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC),
            "scanned_at": 1729987200,
            "delivered_at": 1729987200999,
            "note": "parquet",
        }
        full = [{**base, **row} for row in rows]
        return pa.table({n: pa.array([r[n] for r in full], t) for n, t in types.items()})

    wall = dt.datetime
    put(
        landing,
        f"{_folder(AUTUMN)}/part-0.parquet",
        parquet_bytes(
            table(
                AUTUMN,
                [
                    {"Sendung": 70, "shipped_at": wall(2024, 10, 27, 2, 30)},  # twice: the earlier
                    {"Sendung": 71, "shipped_at": wall(2024, 10, 27, 3, 30)},
                    {"Sendung": 72, "shipped_at": wall(2024, 10, 27, 1, 0), "Gewicht": -0.5},
                    {"Sendung": 73, "shipped_at": wall(2024, 10, 27, 9, 0), "carrier": None},
                ],
                pa.decimal128(15, 2),
            )
        ),
    )
    put(
        landing,
        f"{_folder(AUTUMN)}/part-1.parquet",
        parquet_bytes(
            table(
                AUTUMN,
                [
                    {
                        "Sendung": 74,
                        "shipped_at": wall(2024, 10, 27, 2, 59),
                        "Betrag": decimal.Decimal("1.2300"),
                    },
                    {
                        "Sendung": 75,
                        "shipped_at": wall(2024, 10, 27, 4, 0),
                        "Betrag": decimal.Decimal("1.2345"),
                    },  # wider scale, a non-zero fourth decimal
                ],
                pa.decimal128(10, 4),
            )
        ),
    )
    put(
        landing,
        f"{_folder(AUTUMN)}/late.csv",
        _csv(_row("76", ship_date=AUTUMN.isoformat(), shipped_at="2024-10-27 02:30:00")),
    )
    put(
        landing,
        f"{_folder(SPRING)}/part-0.parquet",
        parquet_bytes(
            table(
                SPRING,
                [
                    {"Sendung": 80, "shipped_at": wall(2024, 3, 31, 2, 30)},  # in the gap
                    {"Sendung": 81, "shipped_at": wall(2024, 3, 31, 3, 0)},
                ],
                pa.decimal128(15, 2),
            )
        ),
    )


@pytest.mark.parametrize("day", [AUTUMN, SPRING], ids=["fall-back", "spring-forward"])
def test_parquet_exports_with_naive_berlin_times_and_narrow_types(spark, tmp_path, day):
    _parquet_exports(tmp_path)
    batch, local = _read_both(spark, tmp_path, day)
    quarantine = assert_same_read(batch, local)
    rows = {r["shipment_id"]: r for r in batch.rows.toArrow().to_pylist()}
    reasons = {r["reason"] for r in quarantine}
    if day == AUTUMN:
        # 02:30 happens twice in Berlin that night; the earlier (summer time) instant wins.
        assert rows[70]["shipped_at"] == dt.datetime(2024, 10, 27, 0, 30, tzinfo=dt.UTC)
        assert rows[76]["shipped_at"] == rows[70]["shipped_at"]
        assert rows[71]["shipped_at"] == dt.datetime(2024, 10, 27, 2, 30, tzinfo=dt.UTC)
        assert rows[74]["amount"] == decimal.Decimal("1.23")
        assert "weight_kg: -0.5 is outside the range (0.0 <= weight_kg <= 1000.0)" in reasons
        assert "amount: value '1.2345' has more than 2 decimal places (never rounded)" in reasons
    else:
        assert set(rows) == {81}
        assert reasons == {
            "shipped_at: value '2024-03-31 02:30:00.000000' does not exist in "
            "Europe/Berlin (a daylight-saving gap)"
        }
    batch.unpersist()


@pytest.mark.parametrize(
    "layout",
    ["{source}/dt={date}", "exports/{source}/{yyyy}/{mm}/{dd}", "{source}/v1/{yyyy}-{mm}/{dd}"],
)
def test_quarantine_rows_name_the_file_and_day_of_any_layout(spark, tmp_path, layout):
    source = SHIPMENTS.model_copy(update={"layout": layout})
    contract = source.contract()
    relpath = f"{contract.day_folder(SPRING)}/a.csv"
    put(
        tmp_path,
        relpath,
        _csv(_row("1"), _row("2", Betrag="-1,00"), _row("3", ship_date="2024-04-01")),
    )
    end = SPRING + dt.timedelta(days=1)
    batch = read_landing_spark(spark, tmp_path, contract, SPRING, end)
    local = read_days(tmp_path, contract, SPRING, end)
    quarantine = assert_same_read(batch, local)
    assert {(r["source_file"], r["partition_date"]) for r in quarantine} == {(relpath, SPRING)}


def test_days_before_the_first_day_are_refused(spark, tmp_path):
    first = CONTRACT.first_day
    assert first is not None
    with pytest.raises(DayBeforeFirstDayError, match="first partition day"):
        read_landing_spark(spark, tmp_path, CONTRACT, first - dt.timedelta(days=2), first)
