"""Deterministic writers for synthetic landing files, spelling values the way producers drift."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idem_assets._lazy import lazy_module
from idem_assets.landing.contract import SourceContract

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pq = lazy_module("pyarrow.parquet")


BERLIN_SUMMER = dt.timezone(dt.timedelta(hours=2))
TIMESTAMP_FORMS = ("z", "offset", "naive", "space")


@dataclass(frozen=True)
class FileStyle:
    """How one file spells its values: the drift between files of one day."""

    timestamp_forms: tuple[str, ...] = ("z",)  # cycled row by row, see render_timestamp
    money_as_number: bool = False  # JSON number / Parquet float64 instead of text / decimal
    ids_as_text: bool = False  # JSON Lines: integer columns as "123"
    parquet_tz: str | None = "UTC"  # None writes naive (UTC) Parquet timestamps
    narrow_ints: bool = False  # Parquet int32 instead of int64


@dataclass(frozen=True)
class PlannedFile:
    """One file the generator will write: rows of typed values plus how to spell them."""

    relpath: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    style: FileStyle = FileStyle()

    @property
    def format(self) -> str:
        """parquet, csv or jsonl, from the suffix."""
        return self.relpath.rsplit(".", 1)[1]


def render_timestamp(value: dt.datetime, form: str) -> str:
    """ISO-8601 text of a UTC instant in one of the accepted forms."""
    fraction = f".{value.microsecond:06d}" if value.microsecond else ""
    if form == "offset":
        local = value.astimezone(BERLIN_SUMMER)
        return f"{local:%Y-%m-%dT%H:%M:%S}{fraction}+02:00"
    if form == "naive":
        return f"{value:%Y-%m-%dT%H:%M:%S}{fraction}"
    if form == "space":
        return f"{value:%Y-%m-%d %H:%M:%S}{fraction}"
    return f"{value:%Y-%m-%dT%H:%M:%S}{fraction}Z"


def _text(value: Any, form: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return render_timestamp(value, form)
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _csv_bytes(planned: PlannedFile) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(planned.columns)
    forms = planned.style.timestamp_forms
    for i, row in enumerate(planned.rows):
        form = forms[i % len(forms)]
        writer.writerow(
            ["" if (v := _text(row.get(c), form)) is None else v for c in planned.columns]
        )
    return out.getvalue().encode("utf-8")


def _json_value(value: Any, form: str, style: FileStyle) -> Any:
    if isinstance(value, Decimal):
        return float(value) if style.money_as_number else str(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return str(value) if style.ids_as_text else value
    return _text(value, form)


def _jsonl_bytes(planned: PlannedFile) -> bytes:
    forms = planned.style.timestamp_forms
    lines = []
    for i, row in enumerate(planned.rows):
        form = forms[i % len(forms)]
        record = {c: _json_value(row.get(c), form, planned.style) for c in planned.columns}
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def _parquet_type(kind: pa.DataType, style: FileStyle) -> pa.DataType:
    # money_as_number writes the sample domain's amounts, decimal(18,2), as floats.
    if kind == pa.decimal128(18, 2) and style.money_as_number:
        return pa.float64()
    if pa.types.is_int64(kind) and style.narrow_ints:
        return pa.int32()
    if pa.types.is_timestamp(kind):
        return pa.timestamp("us", style.parquet_tz)
    return kind


def _parquet_table(planned: PlannedFile, contract: SourceContract) -> pa.Table:
    arrays = []
    for column in planned.columns:
        known = column in contract.schema.names
        kind = (
            _parquet_type(contract.schema.field(column).type, planned.style)
            if known
            else pa.string()
        )
        values = [row.get(column) for row in planned.rows]
        if pa.types.is_floating(kind):
            values = [None if v is None else float(v) for v in values]
        if pa.types.is_timestamp(kind) and kind.tz is None:
            values = [None if v is None else v.replace(tzinfo=None) for v in values]
        arrays.append(pa.array(values, kind))
    return pa.Table.from_arrays(arrays, names=list(planned.columns))


def file_bytes(planned: PlannedFile, contract: SourceContract) -> bytes:
    """The exact bytes of a planned file (identical for identical plans)."""
    if planned.format == "csv":
        return _csv_bytes(planned)
    if planned.format == "jsonl":
        return _jsonl_bytes(planned)
    sink = pa.BufferOutputStream()
    pq.write_table(_parquet_table(planned, contract), sink, compression="snappy")
    return sink.getvalue().to_pybytes()


def write_atomically(path: Path, data: bytes) -> None:
    """Write via a hidden temp file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_bytes(data)
    os.replace(staging, path)
