"""The column types a source may declare, parsed once into a ``ColumnType``.

A declaration spells a type as text (``int64``, ``timestamp``, ``decimal(15,2)``...); it is
parsed here, once, when the declaration loads. What the rest of the library asks of a type
(is it a number, a date, a timestamp?) is answered from the parsed kind, so loading a
declaration needs no Arrow; the Arrow type is built when rows are read or a table written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pyarrow as pa

Kind = Literal["int64", "int32", "float64", "bool", "string", "date", "timestamp", "decimal"]
TYPE_CHOICES = "int64, int32, float64, bool, string, date, timestamp, decimal(P,S)"
# Every accepted spelling of a kind (SQL names too).
_SPELLINGS: dict[str, Kind] = {
    "int64": "int64",
    "bigint": "int64",
    "int32": "int32",
    "integer": "int32",
    "float64": "float64",
    "double": "float64",
    "bool": "bool",
    "boolean": "bool",
    "string": "string",
    "date": "date",
    "timestamp": "timestamp",
}
_DECIMAL = re.compile(r"^(?:decimal|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class ColumnType:
    """A declared column type: its kind, and for decimals the precision and scale."""

    kind: Kind
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.kind == "decimal" else self.kind

    @property
    def is_integer(self) -> bool:
        """int64 or int32."""
        return self.kind in ("int64", "int32")

    @property
    def is_number(self) -> bool:
        """An integer, float or decimal."""
        return self.is_integer or self.kind in ("float64", "decimal")

    @property
    def is_temporal(self) -> bool:
        """A date or a timestamp."""
        return self.kind in ("date", "timestamp")

    def arrow(self) -> pa.DataType:
        """The Arrow type of the column (timestamps are UTC microseconds)."""
        import pyarrow as pa

        if self.kind == "decimal":
            return pa.decimal128(self.precision, self.scale)
        return {
            "int64": pa.int64,
            "int32": pa.int32,
            "float64": pa.float64,
            "bool": pa.bool_,
            "string": pa.string,
            "date": pa.date32,
            "timestamp": lambda: pa.timestamp("us", tz="UTC"),
        }[self.kind]()


def parse_type(text: str) -> ColumnType:
    """The type a declaration spells (``decimal(15,2)``, ``bigint``, ``timestamp``...)."""
    spelled = text.strip().lower()
    if spelled in _SPELLINGS:
        return ColumnType(_SPELLINGS[spelled])
    match = _DECIMAL.match(spelled)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise ValueError(f"decimal({precision},{scale}) needs 1 <= P <= 38 and S <= P")
        return ColumnType("decimal", precision, scale)
    raise ValueError(f"{text!r} is not a column type; allowed: {TYPE_CHOICES}")


@dataclass(frozen=True)
class TypedColumn:
    """A column of a table: its name, declared type and whether it may hold nulls."""

    name: str
    type: ColumnType
    nullable: bool = True

    @classmethod
    def of(cls, name: str, type_text: str, *, nullable: bool = True) -> TypedColumn:
        """A column whose type is spelled as a declaration spells it (``decimal(18,2)``)."""
        return cls(name, parse_type(type_text), nullable)


def arrow_schema(columns: Iterable[TypedColumn]) -> pa.Schema:
    """The Arrow schema of typed columns, in their order."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, c.type.arrow(), nullable=c.nullable) for c in columns])
