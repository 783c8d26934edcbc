"""Line-by-line CSV and JSON Lines parsers for files the vectorised readers refuse.

They are slow on purpose: they run only for defective files, and they say exactly which
data row is wrong instead of failing the whole file.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from typing import TYPE_CHECKING, Any

from idem_assets._lazy import lazy_module
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.raw import RawRows, RejectedRow, raw_fields_json

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


# Fed to the csv module after the last line: if it comes back inside a field, a quoted
# field was still open at the end of the file and swallowed everything after its quote.
_EOF_SENTINEL = "\ue000idem-landing-end-of-file\ue000"


def _is_utf8(values: list[str]) -> bool:
    try:
        "".join(values).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _readable(text: str) -> str:
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _string_table(names: list[str], columns: list[list[str | None]]) -> pa.Table:
    arrays = [pa.array(values, pa.string()) for values in columns]
    return pa.Table.from_arrays(arrays, names=names)


def not_encoded(encoding: str, subject: str, line: int) -> str:
    """The reason for text that the declared encoding does not define."""
    if encoding in ("utf-8", "utf-8-sig"):
        return f"{subject} is not valid UTF-8 (line {line}), re-export the file as UTF-8"
    return (
        f"{subject} holds bytes that are not valid {encoding} (line {line}): check the "
        "source's declared encoding"
    )


def parse_csv_rows(
    data: bytes,
    relpath: str,
    delimiter: str = ",",
    line_offset: int = 0,
    trailing_delimiter: bool = False,
    encoding: str = "utf-8",
    header_in_file: bool = True,
) -> RawRows:
    """Parse CSV record by record; bad rows become rejects, an open quote at EOF an error.

    ``line_offset`` is added to the line numbers reasons give (for a piece of a file).
    ``trailing_delimiter``: every line ends with the delimiter, whose empty last field is
    not a column; a line without it is a ragged row. ``encoding`` names the file's declared
    encoding in reasons (its text arrives as UTF-8). ``header_in_file`` false: the first line
    is the declared columns put in front of a headerless file.
    """
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    reader = csv.reader(
        itertools.chain(io.StringIO(text, newline=""), [_EOF_SENTINEL]), delimiter=delimiter
    )
    header: list[str] | None = None
    columns: list[list[str | None]] = []
    row_numbers: list[int] = []
    rejected: list[RejectedRow] = []
    data_row = 0
    last_line = 0
    for record in reader:
        if record == [_EOF_SENTINEL]:
            break
        if record and record[-1].endswith(_EOF_SENTINEL):
            where = f"data row {data_row + 1}" if header is not None else "the header"
            raise LandingFileError(
                relpath,
                f"unterminated quoted field in {where} (starting on line "
                f"{last_line + 1 + line_offset}) "
                'swallows the rest of the file; close or escape the quote ("") and re-deliver',
            )
        start_line, last_line = last_line + 1 + line_offset, reader.line_num
        if not record:
            continue  # blank line: not a data row
        ends_with_delimiter = len(record) > 1 and record[-1] == ""
        if trailing_delimiter and ends_with_delimiter:
            record = record[:-1]
        if header is None:
            header = [_readable(name) for name in record]
            columns = [[] for _ in header]
            continue
        data_row += 1
        if trailing_delimiter and not ends_with_delimiter:
            reason = (
                f"row does not end with the delimiter {delimiter!r} that ends every line of "
                f"this source (line {start_line}): a ragged or cut-off row"
            )
            rejected.append(RejectedRow(data_row, reason, raw_fields_json(record)))
        elif len(record) != len(header):
            expected = "the header has" if header_in_file else "the source declares"
            reason = (
                f"row has {len(record)} fields but {expected} {len(header)} "
                f"(line {start_line}): check delimiters and quoting"
            )
            rejected.append(RejectedRow(data_row, reason, raw_fields_json(record)))
        elif not _is_utf8(record):
            reason = not_encoded(encoding, "row", start_line)
            rejected.append(RejectedRow(data_row, reason, raw_fields_json(record)))
        else:
            for column, value in zip(columns, record, strict=True):
                column.append(value if value != "" else None)
            row_numbers.append(data_row)
    table = _string_table(header or [], columns)
    notes = () if header is not None else ("no header row: file read as 0 rows",)
    return RawRows(table, pa.array(row_numbers, pa.int64()), tuple(rejected), notes)


def _json_text(value: Any) -> str | None:
    # Every value becomes its JSON text so normalisation sees one representation.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), "null")


def parse_jsonl_rows(
    data: bytes, relpath: str, line_offset: int = 0, encoding: str = "utf-8"
) -> RawRows:
    """Parse JSON Lines line by line; lines that are not JSON objects become rejects.

    ``line_offset`` is added to the line numbers reasons give (for a piece of a file);
    ``encoding`` names the file's declared encoding in reasons.
    """
    del relpath  # every JSON Lines problem is confined to its own line
    records: list[dict[str, Any]] = []
    row_numbers: list[int] = []
    rejected: list[RejectedRow] = []
    data_row = 0
    for line_no, line in enumerate(data.split(b"\n"), start=1 + line_offset):
        if not line.strip():
            continue
        data_row += 1
        raw = raw_fields_json([line.decode("utf-8", "backslashreplace")])
        try:
            value = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            reason = (
                f"line {line_no} is not valid UTF-8 (byte offset {exc.start}), re-export as UTF-8"
                if encoding in ("utf-8", "utf-8-sig")
                else not_encoded(encoding, "line", line_no)
            )
            rejected.append(RejectedRow(data_row, reason, raw))
            continue
        except json.JSONDecodeError as exc:
            reason = f"line {line_no} is not valid JSON: {exc.msg} at column {exc.colno}"
            rejected.append(RejectedRow(data_row, reason, raw))
            continue
        if not isinstance(value, dict):
            reason = f"line {line_no} is a JSON {_kind(value)}, not an object"
            rejected.append(RejectedRow(data_row, reason, raw))
            continue
        records.append(value)
        row_numbers.append(data_row)
    names = list(dict.fromkeys(key for record in records for key in record))
    columns = [[_json_text(record.get(name)) for record in records] for name in names]
    return RawRows(
        _string_table(names, columns),
        pa.array(row_numbers, pa.int64()),
        tuple(rejected),
    )
