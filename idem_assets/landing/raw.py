"""What a file parser hands to normalisation: raw columns, row numbers, structural rejects."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from idem_assets._lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


# Bounds that keep one hostile value from blowing up memory, logs or the quarantine table.
MAX_FIELD_BYTES = 1 << 20
RAW_VALUE_CHARS = 512


@dataclass(frozen=True)
class RejectedRow:
    """A data row the parser could not turn into fields (bad line, wrong field count...)."""

    row_number: int
    reason: str
    raw_record: str


@dataclass(frozen=True)
class RawRows:
    """A file's data rows as read, before any type is enforced."""

    table: pa.Table  # columns as the file names them; duplicates possible
    row_numbers: pa.Array  # int64, 1-based data row of each table row
    rejected: tuple[RejectedRow, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def raw_rows(self) -> int:
        """Every data row seen: parsed plus rejected."""
        return self.table.num_rows + len(self.rejected)

    def shifted(self, rows_before: int) -> RawRows:
        """The same rows numbered after ``rows_before`` earlier rows (a later piece of a file)."""
        if not rows_before:
            return self
        import pyarrow.compute as pc

        return RawRows(
            self.table,
            pc.add(self.row_numbers, rows_before),
            tuple(
                RejectedRow(r.row_number + rows_before, r.reason, r.raw_record)
                for r in self.rejected
            ),
            self.notes,
        )


def empty_raw(note: str) -> RawRows:
    """A file that holds no data rows."""
    return RawRows(pa.table({}), pa.array([], pa.int64()), (), (note,))


def _truncate(text: str) -> str:
    if len(text) <= RAW_VALUE_CHARS:
        return text
    return f"{text[:RAW_VALUE_CHARS]}...[{len(text) - RAW_VALUE_CHARS} more chars]"


def _raw_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        # JSON has no NaN/inf; keep them readable instead of failing the dump.
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, bytes):
        return _truncate(value.decode("utf-8", "backslashreplace"))
    if isinstance(value, str):
        readable = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return _truncate(readable)
    if isinstance(value, dict | list):
        return _truncate(json.dumps(value, default=str, ensure_ascii=False))
    return _truncate(str(value))


def raw_text(value: str) -> str:
    """A text value as ``raw_record_json`` keeps it (cut to a bounded length)."""
    return str(_raw_value(value))


def raw_record_json(record: Mapping[str, Any]) -> str:
    """JSON of a row's raw field values, each value cut to a bounded length."""
    return json.dumps({k: _raw_value(v) for k, v in record.items()}, ensure_ascii=False)


def raw_fields_json(fields: Iterable[Any]) -> str:
    """JSON array of raw field values (for rows whose fields cannot be named)."""
    return json.dumps([_raw_value(v) for v in fields], ensure_ascii=False)


def unique_names(names: Iterable[str]) -> list[str]:
    """Column names made unique (``x``, ``x#2``...) so a raw record can show every field."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out
