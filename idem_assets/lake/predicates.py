"""Delta predicates built from typed, validated values only.

delta-rs takes predicates as SQL text. Nothing here accepts a free-form string
value: literals are ``date``/``datetime``/``int`` objects rendered by this module,
and identifiers must match a strict pattern before they are quoted.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ALIAS = re.compile(r"^[a-z]{1,16}$")


class UnsafePredicateError(ValueError):
    """A value or identifier that must not reach a predicate."""


def quote_identifier(name: str, alias: str | None = None) -> str:
    """Quote a column name after checking it is a plain identifier."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise UnsafePredicateError(f"not a plain column identifier: {name!r}")
    if alias is None:
        return f'"{name}"'
    if not _ALIAS.match(alias):
        raise UnsafePredicateError(f"not a plain table alias: {alias!r}")
    return f'{alias}."{name}"'


def literal(value: object) -> str:
    """Render a typed value as a SQL literal; strings are refused on purpose."""
    # bool is an int subclass; a boolean partition bound is always a bug.
    if isinstance(value, bool):
        raise UnsafePredicateError("boolean values are not valid range bounds")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise UnsafePredicateError(f"naive datetime {value!r}: give it a timezone")
        utc = value.astimezone(dt.UTC)
        return f"TIMESTAMP '{utc.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z'"
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

    def __post_init__(self) -> None:
        literal(self.start)
        literal(self.end)
        quote_identifier(self.column)
        if type(self.start) is not type(self.end):
            raise UnsafePredicateError("range bounds must have the same type")
        if self.end < self.start:  # type: ignore[operator]
            raise UnsafePredicateError(f"empty range: {self.start!r} > {self.end!r}")

    def sql(self, alias: str | None = None) -> str:
        """The predicate text, optionally qualified with a table alias."""
        col = quote_identifier(self.column, alias)
        upper = "<=" if self.inclusive else "<"
        return f"{col} >= {literal(self.start)} AND {col} {upper} {literal(self.end)}"


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


Condition = Range | OneOf


def conjunction(conditions: tuple[Condition, ...], alias: str | None = None) -> str:
    """All conditions joined with AND."""
    return all_of(*(c.sql(alias) for c in conditions))
