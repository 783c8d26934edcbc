"""Value rules as declared: one model per kind of rule, compiled once against its column.

A rule is exactly one of ``allowed``, ``pattern``, ``non_negative`` or ``min``/``max``; the
key it sets says which model reads it (``Rule`` is their union). Each kind says which
column types it applies to and turns its values into the column's Python type when its
column is declared (``compile``), so a bound that does not fit is refused at load.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
)

from idem_assets.landing.column_types import ColumnType
from idem_assets.landing.rules import Severity, ValueRule, pattern_problem


class _RuleBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    severity: Severity = Field(
        default="warn",
        description="warn: an asset check warns with counts and samples; error: the check "
        "fails (blocking downstream where checks block); quarantine: breaking rows are kept "
        "out of the table, with the rule as their reason.",
    )

    def compile(self, column: str, kind: ColumnType) -> ValueRule:
        """The rule on ``column`` of type ``kind``, its values typed (ValueError if unfit)."""
        raise NotImplementedError


class AllowedRule(_RuleBase):
    """The column holds one of a list of values (string and integer columns)."""

    allowed: tuple[str | int, ...] = Field(
        description="The values the column may hold (exact, case-sensitive)."
    )

    def compile(self, column: str, kind: ColumnType) -> ValueRule:
        """The rule, its values in the column's type."""
        if kind.kind == "string":
            values: tuple[Any, ...] = tuple(str(v) for v in self.allowed)
        elif kind.is_integer:
            values = tuple(typed_value(column, kind, v, "allowed value") for v in self.allowed)
        else:
            raise ValueError(f"{column}: allowed applies to string and integer columns, not {kind}")
        return ValueRule(column, "allowed", self.severity, allowed=values)


class PatternRule(_RuleBase):
    """The whole value matches a regular expression (string columns)."""

    pattern: str = Field(description="A regular expression the whole value must match.")

    @field_validator("pattern")
    @classmethod
    def _runnable(cls, value: str) -> str:
        problem = pattern_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def compile(self, column: str, kind: ColumnType) -> ValueRule:
        """The rule on a string column."""
        if kind.kind != "string":
            raise ValueError(f"{column}: pattern applies to string columns, not {kind}")
        return ValueRule(column, "pattern", self.severity, pattern=self.pattern)


class NonNegativeRule(_RuleBase):
    """The value is >= 0 (number columns)."""

    non_negative: Literal[True] = Field(default=True, description="The value is >= 0.")

    def compile(self, column: str, kind: ColumnType) -> ValueRule:
        """The rule on a number column."""
        if not kind.is_number:
            raise ValueError(f"{column}: non_negative applies to number columns, not {kind}")
        return ValueRule(column, "non_negative", self.severity)


class RangeRule(_RuleBase):
    """The value lies within inclusive bounds (numbers, dates and timestamps)."""

    min: str | int | float | None = Field(
        default=None, description="Smallest allowed value (inclusive), in the column's type."
    )
    max: str | int | float | None = Field(
        default=None, description="Largest allowed value (inclusive), in the column's type."
    )

    def compile(self, column: str, kind: ColumnType) -> ValueRule:
        """The rule, its bounds in the column's type."""
        low = None if self.min is None else typed_value(column, kind, self.min, "min")
        high = None if self.max is None else typed_value(column, kind, self.max, "max")
        if low is not None and high is not None and low > high:
            raise ValueError(f"{column}: min {self.min!r} is above max {self.max!r}")
        return ValueRule(column, "range", self.severity, low=low, high=high)


# The keys that declare each kind of rule (min and max both declare a range).
_KEYS: dict[str, tuple[str, ...]] = {
    "allowed": ("allowed",),
    "pattern": ("pattern",),
    "non_negative": ("non_negative",),
    "min/max": ("min", "max"),
}


def _kinds_set(value: Any) -> list[str]:
    """The kinds a declared rule's keys name (a false non_negative names none)."""
    if not isinstance(value, dict):
        return []
    return [
        kind
        for kind, keys in _KEYS.items()
        if any(value.get(key) is not None and value.get(key) is not False for key in keys)
    ]


def _one_kind(value: Any) -> Any:
    """A declared rule sets exactly one kind (checked before its model is chosen)."""
    kinds = _kinds_set(value)
    if isinstance(value, dict) and len(kinds) != 1:
        raise ValueError(
            "a rule sets exactly one of allowed, pattern, non_negative, or "
            f"min and/or max (this one sets {', '.join(kinds) or 'none'})"
        )
    return value


# Each kind of rule by its tag (its model's name), and by the key that declares it.
RULE_KINDS: dict[str, type[_RuleBase]] = {
    kind.__name__: kind for kind in (AllowedRule, PatternRule, NonNegativeRule, RangeRule)
}
_BY_KEY = {
    "allowed": AllowedRule,
    "pattern": PatternRule,
    "non_negative": NonNegativeRule,
    "min/max": RangeRule,
}


def _kind_of(value: Any) -> str | None:
    if isinstance(value, _RuleBase):
        return type(value).__name__
    kinds = _kinds_set(value)
    return _BY_KEY[kinds[0]].__name__ if len(kinds) == 1 else None


Rule = Annotated[
    Annotated[AllowedRule, Tag("AllowedRule")]
    | Annotated[PatternRule, Tag("PatternRule")]
    | Annotated[NonNegativeRule, Tag("NonNegativeRule")]
    | Annotated[RangeRule, Tag("RangeRule")],
    Discriminator(_kind_of),
    BeforeValidator(_one_kind),
]


def typed_value(column: str, kind: ColumnType, value: Any, what: str) -> Any:
    """A rule's value in the column's Python type (ValueError naming column and value)."""
    try:
        if kind.is_integer:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if kind.kind == "decimal":
            return decimal.Decimal(str(value))
        if kind.kind == "float64":
            return float(value)
        if kind.kind == "date":
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
        if kind.kind == "timestamp":
            stamp = (
                value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
            )
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
    except (ValueError, TypeError, decimal.InvalidOperation) as exc:
        raise ValueError(f"{column}: {what} {value!r} is not a {kind} value") from exc
    raise ValueError(f"{column}: {what} applies to numbers, dates and timestamps, not {kind}")
