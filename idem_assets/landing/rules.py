"""Value rules on typed columns: allowed values, ranges, signs and patterns.

A rule is a business rule, not a storage rule: by default it becomes an asset check that
counts and samples the rows breaking it (severity ``warn`` or ``error``); only a rule
declared with severity ``quarantine`` keeps rows out of the table (see docs/landing.md).
Null values never break a rule; nullability is the column's own declaration.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import SchemaError, SchemaValidator, core_schema

from idem_assets._lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")  # imported on first use: see idem_assets._lazy

RuleKind = Literal["allowed", "range", "non_negative", "pattern"]
Severity = Literal["warn", "error", "quarantine"]
SEVERITIES: tuple[Severity, ...] = ("warn", "error", "quarantine")
_SHOWN = 60


@dataclass(frozen=True)
class ValueRule:
    """One rule on one column, with typed bounds (compiled from a declaration)."""

    column: str
    kind: RuleKind
    severity: Severity = "warn"
    allowed: tuple[Any, ...] = ()
    low: Any = None  # inclusive bounds, in the column's Python type
    high: Any = None
    pattern: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "pattern":
            assert self.pattern is not None
            problem = pattern_problem(self.pattern)
            if problem:
                raise ValueError(problem)

    @property
    def name(self) -> str:
        """The rule's name in the ``value_rules`` check: ``<column>_<kind>``
        (e.g. ``status_allowed``)."""
        return f"{self.column}_{self.kind}"

    def describe(self) -> str:
        """The rule in words, for check descriptions and reasons."""
        if self.kind == "allowed":
            return f"{self.column} is one of {', '.join(map(str, self.allowed))}"
        if self.kind == "non_negative":
            return f"{self.column} >= 0"
        if self.kind == "pattern":
            return f"{self.column} matches {self.pattern}"
        if self.low is not None and self.high is not None:
            return f"{_text(self.low)} <= {self.column} <= {_text(self.high)}"
        if self.low is not None:
            return f"{self.column} >= {_text(self.low)}"
        return f"{self.column} <= {_text(self.high)}"

    def violated(self) -> pl.Expr:
        """True where a non-null value breaks the rule (over typed columns)."""
        value = pl.col(self.column)
        if self.kind == "allowed":
            broken = ~value.is_in(pl.lit(pl.Series(list(self.allowed))).implode())
        elif self.kind == "non_negative":
            broken = value < 0
        elif self.kind == "pattern":
            assert self.pattern is not None
            broken = ~value.cast(pl.String).str.contains(anchored(self.pattern))
        else:
            broken = pl.lit(False)
            if self.low is not None:
                broken = broken | (value < pl.lit(self.low))
            if self.high is not None:
                broken = broken | (value > pl.lit(self.high))
        return value.is_not_null() & broken

    def reason_parts(self) -> tuple[str, str]:
        """The text before and after the shown value in this rule's reason."""
        if self.kind == "allowed":
            choices = ", ".join(sorted(map(str, self.allowed)))
            return (f"{self.column}: value '", f"' is not allowed (expected one of {choices})")
        if self.kind == "non_negative":
            return f"{self.column}: ", " is negative (must be >= 0)"
        if self.kind == "pattern":
            return f"{self.column}: value '", f"' does not match {self.pattern}"
        return f"{self.column}: ", f" is outside the range ({self.describe()})"

    def reason(self) -> pl.Expr:
        """The message for a row that breaks the rule (names the column, value and rule)."""
        shown = pl.col(self.column).cast(pl.String)
        shown = (
            pl.when(shown.str.len_chars() > _SHOWN)
            .then(shown.str.slice(0, _SHOWN) + pl.lit("..."))
            .otherwise(shown)
        )
        before, after = self.reason_parts()
        # Literal pieces, not a format string: declared values and patterns may hold braces.
        return pl.concat_str([pl.lit(before), shown, pl.lit(after)])


def anchored(pattern: str) -> str:
    r"""``pattern`` matched against the whole value.

    ``\z`` rather than ``$``, which in many regex dialects also matches before a final line
    break: a value with a trailing newline never passes a pattern that forbids it.
    """
    return rf"^(?:{pattern})\z"


@functools.cache
def pattern_problem(pattern: str) -> str | None:
    """Why a rule pattern cannot be used by the reader (Rust regex, as polars runs it), or None.

    Cached: a declared pattern is checked when its declaration is validated and again when
    its rule is compiled, each time the code location loads.
    """
    try:
        re.compile(pattern)
        _rust_regex(anchored(pattern))
    except (re.error, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (
            f"pattern {pattern!r} is not a regular expression the reader accepts "
            f"(Rust regex syntax: no look-around or back-references): {first}"
        )
    return None


def _rust_regex(pattern: str) -> None:
    """Raise ValueError when the Rust ``regex`` crate, Polars' engine, rejects ``pattern``.

    Compiled by pydantic-core, loaded with Dagster anyway and built on the same crate:
    every import of the code location validates its declarations, and this way does not
    import Polars for it (~200 ms). The message reads as Polars' does: ``regex error:
    <the crate's message>``.
    """
    try:
        SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))
    except SchemaError as error:
        # 'Error building "str" validator:\n  SchemaError: <the crate's message>'
        raise ValueError(f"regex error: {str(error).split('SchemaError: ', 1)[-1]}") from None


def _text(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date | decimal.Decimal):
        return str(value)
    return repr(value) if isinstance(value, str) else str(value)


def rules_of(rules: tuple[ValueRule, ...], *severities: Severity) -> tuple[ValueRule, ...]:
    """The rules with one of the given severities, in declaration order."""
    return tuple(rule for rule in rules if rule.severity in severities)
