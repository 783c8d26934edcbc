"""Vectorised readers for Parquet, CSV and JSON Lines bytes, falling back to careful parsers."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.landing.careful import parse_csv_rows, parse_jsonl_rows
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.raw import RawRows, empty_raw

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pacsv = lazy_module("pyarrow.csv")
    pq = lazy_module("pyarrow.parquet")


_LINE_STARTS_BLANK = re.compile(rb"\n[\n\r \t]")


def row_numbers(count: int) -> pa.Array:
    """1..count as an int64 array."""
    import polars as pl  # here, not at import: see idem_assets._lazy

    return pl.int_range(1, count + 1, dtype=pl.Int64, eager=True).to_arrow()


@dataclass(frozen=True)
class TextDialect:
    """How a source writes its text files (CSV and JSON Lines), as the parsers need it."""

    delimiter: str = ","
    trailing_delimiter: bool = False
    encoding: str = "utf-8"  # declared; the parsers get the text as UTF-8 (for reasons)
    header: bool = True  # False: the header line is the declared columns, not the file's


def read_raw(
    data: bytes,
    fmt: str,
    relpath: str,
    string_columns: frozenset[str],
    dialect: TextDialect | None = None,
    line_offset: int = 0,
) -> RawRows:
    """Parse one file's bytes (or one piece of them, whose lines start after
    ``line_offset``); ``string_columns`` are JSON keys kept as JSON text."""
    dialect = dialect or TextDialect()
    if not data:
        return empty_raw("zero-byte file: read as 0 rows")
    if fmt == "parquet":
        return _read_parquet(data, relpath)
    if fmt == "csv":
        return _read_csv(data, relpath, dialect, line_offset)
    return _read_jsonl(data, relpath, string_columns, line_offset, dialect.encoding)


def _read_parquet(data: bytes, relpath: str) -> RawRows:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        expected = parquet.metadata.num_rows
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise LandingFileError(
            relpath, f"not a readable Parquet file, truncated or corrupt ({exc}), re-deliver it"
        ) from exc
    if table.num_rows != expected:
        raise LandingFileError(
            relpath, f"Parquet footer promises {expected} rows but {table.num_rows} were read"
        )
    return RawRows(_polars_ready(table), row_numbers(table.num_rows))


def _polars_native(kind: pa.DataType) -> bool:
    t = pa.types
    return any(
        check(kind)
        for check in (
            t.is_integer,
            t.is_floating,
            t.is_boolean,
            t.is_string,
            t.is_large_string,
            t.is_string_view,
            t.is_binary,
            t.is_large_binary,
            t.is_date32,
            t.is_timestamp,
            t.is_decimal128,
            t.is_struct,
            t.is_list,
            t.is_large_list,
            t.is_null,
            t.is_time,
            t.is_duration,
        )
    )


def _polars_ready(table: pa.Table) -> pa.Table:
    """Arrow types polars cannot take as they are, made plain without changing any value."""
    columns = []
    for column in table.columns:
        kind = column.type
        if pa.types.is_dictionary(kind):
            column = column.cast(kind.value_type)
            kind = column.type
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            # Zoned instants are stored in UTC already: only the label changes, and polars
            # needs an IANA name rather than "+02:00". Naive ones stay naive: they are wall
            # clock times in the source's declared zone.
            column = column.cast(pa.timestamp(kind.unit, "UTC"))
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            try:
                column = column.cast(pa.string())
            except pa.ArrowInvalid:
                pass  # invalid UTF-8 stays binary and is judged value by value
        elif pa.types.is_date64(kind):
            column = column.cast(pa.date32())
        elif not _polars_native(kind):
            # Rare exotic types (maps, unions, decimal256...): judged by their text form.
            column = pa.chunked_array(
                [pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())]
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _csv_header(data: bytes, delimiter: str) -> list[str] | None:
    """The header of a CSV whose first line is a complete, clean record, else None."""
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not line.strip() or line.count(b'"') % 2:
        return None
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return next(csv.reader([text], delimiter=delimiter))


def _read_csv(data: bytes, relpath: str, dialect: TextDialect, line_offset: int) -> RawRows:
    delimiter = dialect.delimiter

    def careful() -> RawRows:
        return parse_csv_rows(
            data,
            relpath,
            delimiter,
            line_offset,
            dialect.trailing_delimiter,
            dialect.encoding,
            dialect.header,
        )

    header = _csv_header(data, delimiter)
    # An odd number of quotes means a quote somewhere is open or stray: let the careful
    # parser decide whether the file is still countable.
    if header is None or data.count(b'"') % 2:
        return careful()
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
    except pa.ArrowInvalid:
        return careful()
    if table.column_names != header:
        return careful()
    if dialect.trailing_delimiter:
        # The empty field after every line's last delimiter: never a column. A value there
        # means a line with one field too many: the careful parser names it.
        if (
            not header
            or header[-1] != ""
            or table.column(table.num_columns - 1).null_count != table.num_rows
        ):
            return careful()
        table = table.remove_column(table.num_columns - 1)
    return RawRows(table, row_numbers(table.num_rows))


def _data_lines(data: bytes) -> int:
    """Non-blank lines, counted without a Python loop unless a line starts with whitespace."""
    body = data.rstrip(b"\n")
    if not body:
        return 0
    # A blank line is a newline followed by whitespace or another newline: if no line
    # starts that way, every line holds something and counting newlines is enough.
    if not body[:1].isspace() and _LINE_STARTS_BLANK.search(body) is None:
        return body.count(b"\n") + 1
    return sum(1 for line in body.split(b"\n") if line.strip())


def _read_jsonl(
    data: bytes, relpath: str, string_columns: frozenset[str], line_offset: int, encoding: str
) -> RawRows:
    import polars as pl  # here, not at import: see idem_assets._lazy

    try:
        frame = pl.read_ndjson(
            io.BytesIO(data),
            infer_schema_length=None,
            schema_overrides={name: pl.String for name in string_columns},
        )
    except pl.exceptions.PolarsError:
        return parse_jsonl_rows(data, relpath, line_offset, encoding)
    # One object per line is the contract; any other shape is sorted out line by line.
    if frame.height != _data_lines(data):
        return parse_jsonl_rows(data, relpath, line_offset, encoding)
    return RawRows(frame.to_arrow(), row_numbers(frame.height))
