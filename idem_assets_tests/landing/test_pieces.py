"""Reading a file in pieces judges exactly as reading it whole: same rows, same quarantine
rows with the same row and line numbers, same notes; only memory differs.

Both engines read through ``FileReader``, so this is what keeps a 2 GB CSV on a 1 GB
executor equal to the same file read on a laptop.
"""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path

import pytest

from idem_assets.lake import fingerprint
from idem_assets.landing import read_days
from idem_assets.landing.pieces import text_pieces
from idem_assets.sample.generator import generate
from idem_assets.sample.sources import EVENTS, ORDERS
from idem_assets_tests.landing.builders import DAY, day_file, jsonl, order, orders_csv, put
from idem_assets_tests.spark.defects import write_defects

TS = "2024-03-01T10:00:00Z"
SIZES = (1, 61, 4096)


def _state(batch) -> dict:
    return {
        "rows": fingerprint(batch.rows),
        "row_list": batch.rows.to_pylist(),
        "quarantine": batch.quarantine.to_pylist(),
        "files": [(f.relpath, f.size, f.sha256, f.rows) for f in batch.files],
        "notes": dict(batch.notes),
        "dropped": dict(batch.dropped_columns),
        "ignored": dict(batch.ignored_files),
    }


def _same_in_pieces(landing: Path, contract, start=DAY, days=1) -> dict:
    end = start + dt.timedelta(days=days)
    whole = _state(read_days(landing, contract, start, end))
    for size in SIZES:
        assert _state(read_days(landing, contract, start, end, piece_bytes=size)) == whole, size
    return whole


def test_every_defect_reads_the_same_in_pieces(tmp_path):
    write_defects(tmp_path)
    whole = _same_in_pieces(tmp_path, ORDERS)
    assert whole["quarantine"] and any("(line " in q["reason"] for q in whole["quarantine"])


@pytest.mark.parametrize("contract", [ORDERS, EVENTS], ids=lambda c: c.name)
def test_generated_days_read_the_same_in_pieces(tmp_path, contract):
    generate(tmp_path, DAY, 2, seed=3)
    assert _same_in_pieces(tmp_path, contract, days=2)["row_list"]


def test_quoted_newlines_and_gzip_never_split_a_record(tmp_path):
    lines = [
        f'{i},7,1.00,"pa\nid {i}",2024-03-01,{TS}'
        if i % 3 == 0
        else f"{i},7,1.00,paid,2024-03-01,{TS}"
        for i in range(1, 40)
    ]
    lines.insert(7, f"x,7,1.00,paid,2024-03-01,{TS},extra-field")  # a ragged row (line numbers)
    text = orders_csv(*lines)
    put(tmp_path, day_file("quoted.csv"), text)
    put(tmp_path, day_file("quoted2.csv.gz"), gzip.compress(text.encode()))
    whole = _same_in_pieces(tmp_path, ORDERS)
    reasons = [q["reason"] for q in whole["quarantine"]]
    assert (
        reasons.count(
            "row has 7 fields but the header has 6 (line 11): check delimiters and quoting"
        )
        == 2
    )
    assert {r["status"] for r in whole["row_list"]} >= {"paid", "pa\nid 3"}


def test_a_json_key_missing_from_early_lines_reads_as_null_there(tmp_path):
    early = [{k: v for k, v in order(i).items() if k != "customer_id"} for i in range(1, 30)]
    put(tmp_path, day_file("sparse.jsonl"), jsonl(*early, order(99)))
    whole = _same_in_pieces(tmp_path, ORDERS)
    assert len(whole["row_list"]) == 30 and not whole["quarantine"]
    assert sum(r["customer_id"] is None for r in whole["row_list"]) == 29


def test_a_json_key_missing_from_the_whole_file_quarantines_every_row(tmp_path):
    rows = [{k: v for k, v in order(i).items() if k != "status"} for i in range(1, 20)]
    put(tmp_path, day_file("nostatus.jsonl"), jsonl(*rows))
    whole = _same_in_pieces(tmp_path, ORDERS)
    assert not whole["row_list"] and len(whole["quarantine"]) == 19
    assert {q["reason"].split(" (it has")[0] for q in whole["quarantine"]} == {
        "file lacks contract column(s) status"
    }


def test_pieces_are_whole_records_and_line_offsets_are_the_files():
    text = b"a,b\n1,2\n" + b'"x\ny",3\n' * 5 + b"4,5\n"
    pieces = list(text_pieces([text[i : i + 3] for i in range(0, len(text), 3)], "csv", 10))
    assert len(pieces) > 3
    assert pieces[0].data.startswith(b"a,b\n") and pieces[0].line_offset == 0
    bodies = [p.data if p.index == 0 else p.data.removeprefix(b"a,b\n") for p in pieces]
    assert b"".join(bodies) == text
    for piece in pieces[1:]:
        assert piece.data.startswith(b"a,b\n") and piece.data.count(b'"') % 2 == 0
    for piece in pieces[1:]:
        before = b"".join(bodies[: piece.index])
        first_line = before.count(b"\n") + 1  # the physical line the piece's body starts on
        assert piece.line_offset == first_line - 2  # its line 2 (after the header) is that
    jsonl_pieces = list(text_pieces([b'{"a":1}\n' * 9], "jsonl", 16))
    assert [p.line_offset for p in jsonl_pieces] == [0, 2, 4, 6, 8]
    assert list(text_pieces([], "csv")) and next(iter(text_pieces([], "jsonl"))).data == b""
