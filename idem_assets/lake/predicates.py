"""Delta predicates built from typed, validated values only.

delta-rs takes predicates as SQL text. Literals are ``date``/``datetime``/``int``
objects rendered by this module; the one kind of text value, a partition key
(``In``), is checked for control characters and rendered with its quotes doubled by
``text_literal`` alone. Identifiers must match a strict pattern before they are quoted.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


# A plain column identifier: what a predicate may quote, a write spec may name and a source
# may declare (io_manager.spec and sources.columns import it from here, the lowest layer).
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ALIAS = re.compile(r"^[a-z]{1,16}$")


class UnsafePredicateError(ValueError):
    """A value or identifier that must not reach a predicate."""


def is_identifier(name: object) -> bool:
    """Whether ``name`` is a plain column identifier (letters, digits, _; not digit-first)."""
    return isinstance(name, str) and IDENTIFIER.match(name) is not None


def quote_identifier(name: str, alias: str | None = None) -> str:
    """Quote a column name after checking it is a plain identifier."""
    if not is_identifier(name):
        raise UnsafePredicateError(f"not a plain column identifier: {name!r}")
    if alias is None:
        return f'"{name}"'
    if not _ALIAS.match(alias):
        raise UnsafePredicateError(f"not a plain table alias: {alias!r}")
    return f'{alias}."{name}"'


def literal(value: object, *, wall_clock: bool = False) -> str:
    """Render a typed value as a SQL literal; strings are refused on purpose.

    ``wall_clock`` renders a datetime without its offset, as its local time: the form a
    column of naive timestamps (Delta ``timestamp_ntz``) is compared with.
    """
    # bool is an int subclass; a boolean partition bound is always a bug.
    if isinstance(value, bool):
        raise UnsafePredicateError("boolean values are not valid range bounds")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise UnsafePredicateError(f"naive datetime {value!r}: give it a timezone")
        # Quoted text, cast to the column's type by the engine: a TIMESTAMP literal is
        # nanoseconds, which delta-rs will not compare with a microsecond column.
        if wall_clock:
            return f"'{value.strftime('%Y-%m-%dT%H:%M:%S.%f')}'"
        utc = value.astimezone(dt.UTC)
        return f"'{utc.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    raise UnsafePredicateError(
        f"{type(value).__name__} values cannot be used in predicates; pass a date, datetime or int"
    )


@dataclass(frozen=True)
class Range:
    """``column`` in ``[start, end)`` (half-open) or ``[start, end]`` when ``inclusive``."""

    column: str
    start: object
    end: object
    inclusive: bool = False
    # Datetime bounds compared as wall-clock times (a column of naive timestamps).
    wall_clock: bool = False

    def __post_init__(self) -> None:
        literal(self.start)
        literal(self.end)
        quote_identifier(self.column)
        if type(self.start) is not type(self.end):
            raise UnsafePredicateError("range bounds must have the same type")
        if self.end < self.start:  # type: ignore[operator]
            raise UnsafePredicateError(f"empty range: {self.start!r} > {self.end!r}")

    def bounds(self, kind: pa.DataType) -> tuple[pa.Scalar, pa.Scalar]:
        """The bounds as Arrow scalars of ``kind`` (wall-clock bounds lose their offset)."""
        start, end = self.start, self.end
        if self.wall_clock:
            start = start.replace(tzinfo=None)  # type: ignore[attr-defined]
            end = end.replace(tzinfo=None)  # type: ignore[attr-defined]
        return pa.scalar(start, type=kind), pa.scalar(end, type=kind)

    def sql(self, alias: str | None = None) -> str:
        """The predicate text, optionally qualified with a table alias."""
        col = quote_identifier(self.column, alias)
        upper = "<=" if self.inclusive else "<"
        start = literal(self.start, wall_clock=self.wall_clock)
        end = literal(self.end, wall_clock=self.wall_clock)
        return f"{col} >= {start} AND {col} {upper} {end}"


def all_of(*parts: str) -> str:
    """Conjunction of already-rendered predicate parts."""
    return " AND ".join(f"({p})" for p in parts if p)


def date_range(column: str, start: dt.date, end: dt.date) -> Range:
    """Half-open ``[start, end)`` range over a date column, validated."""
    for bound in (start, end):
        if not isinstance(bound, dt.date) or isinstance(bound, dt.datetime):
            raise UnsafePredicateError(f"date range bounds must be dates, got {bound!r}")
    if end <= start:
        raise UnsafePredicateError(f"empty date range [{start}, {end})")
    return Range(column, start, end)


_CHOICE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class OneOf:
    """``column = value`` where ``value`` is one of a fixed set of code constants."""

    column: str
    value: str
    allowed: frozenset[str]

    def __post_init__(self) -> None:
        quote_identifier(self.column)
        if self.value not in self.allowed or not _CHOICE.match(self.value):
            raise UnsafePredicateError(
                f"{self.column} value {self.value!r} is not one of {sorted(self.allowed)}"
            )

    def sql(self, alias: str | None = None) -> str:
        """The predicate text, optionally qualified with a table alias."""
        return f"{quote_identifier(self.column, alias)} = '{self.value}'"


_MAX_TEXT_CHARS = 1024


def text_literal(value: str) -> str:
    """A partition key as a SQL string literal: no control characters, quotes doubled."""
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT_CHARS:
        raise UnsafePredicateError(
            f"partition value must be text of 1 to {_MAX_TEXT_CHARS} characters, got {value!r}"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise UnsafePredicateError(f"partition value {value!r} holds a control character")
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class In:
    """``column`` is one of ``values``: the keys of static or dynamic partitions.

    Values are text (partition keys as they are), integers or dates, all of one kind.
    """

    column: str
    values: tuple[str | int | dt.date, ...]
    # For people: what the values are (e.g. days spelled in a format), when a list of them
    # would say less; never part of the predicate.
    described: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        quote_identifier(self.column)
        if not self.values:
            raise UnsafePredicateError(f"{self.column}: an empty set of partition values")
        kinds = {type(v) for v in self.values}
        if len(kinds) != 1:
            raise UnsafePredicateError(f"{self.column}: partition values of mixed types {kinds}")
        for value in self.values:
            self._literal(value)

    @staticmethod
    def _literal(value: object) -> str:
        return text_literal(value) if isinstance(value, str) else literal(value)

    def sql(self, alias: str | None = None) -> str:
        """The predicate text, optionally qualified with a table alias."""
        rendered = ", ".join(self._literal(v) for v in self.values)
        return f"{quote_identifier(self.column, alias)} IN ({rendered})"


Condition = Range | OneOf | In


def conjunction(conditions: tuple[Condition, ...], alias: str | None = None) -> str:
    """All conditions joined with AND."""
    return all_of(*(c.sql(alias) for c in conditions))
