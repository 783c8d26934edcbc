"""Exports as tools really write them: null spellings, the folder's day as a column,
headerless pipe files with a trailing delimiter, other suffixes, encodings, date formats.

Every test runs on both engines (``read_day``): the Spark executors run the same reader.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
from decimal import Decimal

import pyarrow as pa
import pytest

from idem_assets.landing import day_signature, list_days
from idem_assets.landing.files import discover_day
from idem_assets.sources import LandingSource
from idem_assets.sources.__main__ import main as sources_main
from idem_assets_tests.landing.builders import DAY, parquet_bytes, put, reasons

BERLIN_TEN = dt.datetime(2024, 3, 1, 9, 0, tzinfo=dt.UTC)  # 10:00 in Berlin (CET)


def _source(**fields) -> LandingSource:
    base = {
        "name": "export",
        "first_day": "2024-01-01",
        "natural_key": ["id"],
        "columns": [
            {"name": "id", "type": "int64"},
            {"name": "amount", "type": "decimal(12,2)"},
            {"name": "label", "type": "string"},
        ],
    }
    return LandingSource.model_validate({**base, **fields})


def _folder(name: str, day: dt.date = DAY, source: str = "export") -> str:
    return f"{source}/date={day.isoformat()}/{name}"


def _rows(batch) -> list[dict]:
    return batch.rows.to_pylist()


def test_declared_null_spellings_are_null_in_every_column_string_columns_too(read_day, tmp_path):
    source = _source(null_values=["NA", "NULL", "\\N"])
    text = "id,amount,label\n1,NA,NA\n2,NULL, NULL \n3,\\N,\\N\n4,,x\n5,1.50,NAN\n"
    put(tmp_path, _folder("a.csv"), text)
    lines = "".join(
        f'{{"id": {i}, "amount": {a}, "label": {b}}}\n'
        for i, a, b in [(6, '"NA"', '"NA"'), (7, "null", '"\\\\N"'), (8, '"2.00"', '"na"')]
    )
    put(tmp_path, _folder("b.jsonl"), lines)
    batch = read_day(tmp_path, source.contract())
    assert not reasons(batch)
    assert _rows(batch) == [
        {"id": 1, "amount": None, "label": None},
        {"id": 2, "amount": None, "label": None},
        {"id": 3, "amount": None, "label": None},
        {"id": 4, "amount": None, "label": "x"},
        {"id": 5, "amount": Decimal("1.50"), "label": "NAN"},
        {"id": 6, "amount": None, "label": None},
        {"id": 7, "amount": None, "label": None},
        {"id": 8, "amount": Decimal("2.00"), "label": "na"},
    ]
    assert batch.null_spellings == {
        "amount": {"NA": 2, "NULL": 1, "\\N": 1},
        "label": {"NA": 2, "NULL": 1, "\\N": 2},
    }


def test_a_columns_own_null_values_replace_the_sources(read_day, tmp_path):
    source = _source(
        null_values=["NA"],
        columns=[
            {"name": "id", "type": "int64"},
            {"name": "amount", "type": "decimal(12,2)", "null_values": ["-"]},
            {"name": "label", "type": "string", "null_values": []},
        ],
    )
    put(tmp_path, _folder("a.csv"), "id,amount,label\n1,-,NA\n2,NA,x\n")
    batch = read_day(tmp_path, source.contract())
    assert _rows(batch) == [{"id": 1, "amount": None, "label": "NA"}]
    assert reasons(batch) == ["amount: value 'NA' is not a decimal number like 12.34"]


def test_without_null_values_NA_is_a_bad_number_and_plain_text(read_day, tmp_path):
    put(tmp_path, _folder("a.csv"), "id,amount,label\n1,NA,NA\n2,1.00,NA\n")
    batch = read_day(tmp_path, _source().contract())
    assert _rows(batch) == [{"id": 2, "amount": Decimal("1.00"), "label": "NA"}]
    assert reasons(batch) == ["amount: value 'NA' is not a decimal number like 12.34"]


def test_parquet_strings_are_values_not_spellings(read_day, tmp_path):
    table = pa.table(
        {"id": [1], "amount": [None], "label": ["NA"]},
        schema=pa.schema(
            [("id", pa.int64()), ("amount", pa.decimal128(12, 2)), ("label", pa.string())]
        ),
    )
    put(tmp_path, _folder("a.parquet"), parquet_bytes(table))
    batch = read_day(tmp_path, _source(null_values=["NA"]).contract())
    assert _rows(batch) == [{"id": 1, "amount": None, "label": "NA"}]


def test_the_folders_day_is_a_column_and_can_be_the_partition_date(read_day, tmp_path):
    source = _source(
        layout="{source}/{yyyy}/{mm}/{dd}",
        columns=[
            {"name": "id", "type": "int64"},
            {"name": "day", "type": "date", "folder_day": True},
            {"name": "label", "type": "string"},
        ],
        partition_date="day",
    )
    contract = source.contract()
    folder = f"export/{DAY:%Y/%m/%d}"
    # A file's own "day" column is not the folder's day: it is not read.
    put(tmp_path, f"{folder}/a.csv", "id,label,day\n1,x,1999-01-01\n2,y,nonsense\n")
    batch = read_day(tmp_path, contract)
    assert _rows(batch) == [
        {"id": 1, "day": DAY, "label": "x"},
        {"id": 2, "day": DAY, "label": "y"},
    ]
    assert batch.dropped_columns == {f"{folder}/a.csv": ("day",)}
    assert source.resolved_strategy == "overwrite" and source.resolved_partition_column == "day"
    assert list_days(tmp_path, contract) == [DAY]


TBL = ["id", "amount", "label"]


def _tbl_source(**fields) -> LandingSource:
    return _source(
        csv={
            "delimiter": "|",
            "header": False,
            "trailing_delimiter": True,
            "suffixes": [".tbl", ".dat"],
        },
        formats=["csv"],
        **fields,
    )


def test_headerless_pipe_files_with_a_trailing_delimiter_read_in_declared_order(read_day, tmp_path):
    text = "1|1.50| padded, with a comma |\n2|2.00|x|\n3|3.00|y\n4|4.00|z|extra|\n\n5|5.00||\n"
    put(tmp_path, _folder("part.tbl"), text)
    put(tmp_path, _folder("more.dat.gz"), gzip.compress(b"6|6.00|gz|\n"))
    put(tmp_path, _folder("notes.txt"), "not this source's suffix")
    contract = _tbl_source().contract()
    batch = read_day(tmp_path, contract)
    assert _rows(batch) == [
        {"id": 6, "amount": Decimal("6.00"), "label": "gz"},
        {"id": 1, "amount": Decimal("1.50"), "label": " padded, with a comma "},
        {"id": 2, "amount": Decimal("2.00"), "label": "x"},
        {"id": 5, "amount": Decimal("5.00"), "label": None},
    ]
    assert batch.quarantine.select(["source_file", "row_number", "reason"]).to_pylist() == [
        {
            "source_file": _folder("part.tbl"),
            "row_number": 3,
            "reason": "row does not end with the delimiter '|' that ends every line of this "
            "source (line 3): a ragged or cut-off row",
        },
        {
            "source_file": _folder("part.tbl"),
            "row_number": 4,
            "reason": (
                "row has 4 fields but the source declares 3 (line 4): check delimiters and quoting"
            ),
        },
    ]
    assert discover_day(tmp_path, contract, DAY).ignored == {
        _folder("notes.txt"): "unsupported suffix '.txt': expected one of .csv, .csv.gz, .tbl, "
        ".tbl.gz, .dat, .dat.gz"
    }


def test_a_header_line_with_a_trailing_delimiter_is_not_a_column(read_day, tmp_path):
    source = _source(csv={"delimiter": "|", "trailing_delimiter": True})
    put(tmp_path, _folder("a.csv"), "id|amount|label|\n1|1.00|x|\n")
    assert _rows(read_day(tmp_path, source.contract())) == [
        {"id": 1, "amount": Decimal("1.00"), "label": "x"}
    ]


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("cp1252", "id,amount,label\n1,1.00,Müller – Café €\n".encode("cp1252")),
        ("latin-1", "id,amount,label\n1,1.00,Müller Café\n".encode("latin-1")),
        ("utf-16", "id,amount,label\n1,1.00,Müller – Café €\n".encode("utf-16")),
        ("utf-8-sig", "id,amount,label\n1,1.00,Müller – Café €\n".encode("utf-8-sig")),
    ],
)
def test_declared_encodings_store_the_right_characters(read_day, tmp_path, encoding, data):
    assert encoding != "utf-16" or data.startswith((b"\xff\xfe", b"\xfe\xff"))  # a BOM
    put(tmp_path, _folder("a.csv"), data)
    contract = _source(encoding=encoding).contract()
    batch = read_day(tmp_path, contract)
    label = "Müller Café" if encoding == "latin-1" else "Müller – Café €"
    assert _rows(batch) == [{"id": 1, "amount": Decimal("1.00"), "label": label}]
    # The signature hashes the bytes as delivered, not the text they decode to.
    assert batch.files[0].sha256 == hashlib.sha256(data).hexdigest()
    assert day_signature(tmp_path, contract, DAY) == batch.signature


def test_a_byte_the_declared_encoding_lacks_quarantines_its_row_only(read_day, tmp_path):
    data = "id,amount,label\n1,1.00,Café\n".encode("cp1252") + b"2,2.00,bad \x81 byte\n3,3.00,ok\n"
    put(tmp_path, _folder("a.csv"), data)
    batch = read_day(tmp_path, _source(encoding="cp1252").contract())
    assert [r["id"] for r in _rows(batch)] == [1, 3] and _rows(batch)[0]["label"] == "Café"
    assert reasons(batch) == [
        "row holds bytes that are not valid cp1252 (line 3): check the source's declared encoding"
    ]


def test_date_and_timestamp_text_in_declared_formats(read_day, tmp_path):
    source = _source(
        timezone="Europe/Berlin",
        columns=[
            {"name": "id", "type": "int64"},
            {"name": "booked", "type": "date", "format": "%d.%m.%Y"},
            {"name": "at", "type": "timestamp", "format": "%m/%d/%Y %I:%M %p"},
        ],
    )
    text = (
        "id,booked,at\n1,31.01.2024,03/01/2024 10:00 AM\n2,2024-01-31,03/01/2024 10:00 PM\n"
        "3,31.02.2024,03/31/2024 02:30 AM\n"
    )
    put(tmp_path, _folder("a.csv"), text)
    batch = read_day(tmp_path, source.contract())
    assert _rows(batch) == [{"id": 1, "booked": dt.date(2024, 1, 31), "at": BERLIN_TEN}]
    assert reasons(batch) == [
        "booked: value '2024-01-31' is not a date in the form %d.%m.%Y",
        "booked: value '31.02.2024' is not a date in the form %d.%m.%Y; at: value "
        "'03/31/2024 02:30 AM' does not exist in Europe/Berlin (a daylight-saving gap)",
    ]


def test_inspect_shows_nulls_by_spelling_folder_days_and_the_encoding(tmp_path, capsys):
    declaration = tmp_path / "defs.yaml"
    declaration.write_text(
        "name: export\nfirst_day: 2024-01-01\nlayout: '{source}/{yyyy}/{mm}/{dd}'\n"
        "encoding: cp1252\nnull_values: [NA]\nnatural_key: [id]\npartition_date: day\n"
        "columns:\n  - {name: id, type: int64}\n  - {name: day, type: date, folder_day: true}\n"
        "  - {name: label, type: string}\n"
    )
    put(
        tmp_path / "landing",
        f"export/{DAY:%Y/%m/%d}/a.csv",
        "id,label\n1,NA\n2,Café\n".encode("cp1252"),
    )
    code = sources_main(
        [
            "inspect",
            str(declaration),
            "--landing",
            str(tmp_path / "landing"),
            "--start",
            DAY.isoformat(),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert '"nulls_by_spelling": {\n    "label": {\n      "NA": 1' in out
    assert f'"export/{DAY:%Y/%m/%d}/a.csv": "{DAY.isoformat()}"' in out
    assert '"folder_day_columns": [\n    "day"\n  ]' in out and '"encoding": "cp1252"' in out
