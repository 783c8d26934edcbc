"""Number text in the spelling a source declares: separators, decimal shapes, epoch values.

The patterns are plain regular expressions in Rust's (polars) syntax. Both engines judge
values with this code: Spark executors run the same landing reader (docs/spark.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy_module("polars")  # imported on first use: see idem_assets._lazy


DECIMAL_SEPARATORS = (".", ",")
THOUSANDS_SEPARATORS = (",", ".", " ", "'", "_")
SEPARATOR_HINT = (
    " (if the source writes decimal commas or thousands separators, declare "
    "them, e.g. numbers: {decimal: ',', thousands: '.'})"
)
EPOCH_MICROS = {"seconds": 1_000_000, "milliseconds": 1_000}
EPOCH_FRACTION_DIGITS = {"seconds": 6, "milliseconds": 3}
# Years 0001 to 9999, in microseconds since the epoch.
MICROS_RANGE = (-62_135_596_800 * 10**6, 253_402_300_800 * 10**6 - 1)
EPOCH_TEXT = r"^([+-]?)(\d{1,18})(?:\.(\d*))?$"
# The zero fraction integer text may carry (``12.0``), removed from its canonical text.
ZERO_FRACTION = r"\.0+$"
# A digit that is not zero: one among the digits beyond a kept precision means rounding.
NONZERO_DIGIT = "[1-9]"


@dataclass(frozen=True)
class Separators:
    """The decimal and (optional) thousands separators of a source's number text."""

    decimal: str = "."
    thousands: str | None = None

    def __post_init__(self) -> None:
        if self.decimal not in DECIMAL_SEPARATORS:
            raise ValueError(
                f"decimal separator {self.decimal!r} is not one of "
                f"{', '.join(map(repr, DECIMAL_SEPARATORS))}"
            )
        if self.thousands is not None and self.thousands not in THOUSANDS_SEPARATORS:
            raise ValueError(
                f"thousands separator {self.thousands!r} is not one of "
                f"{', '.join(map(repr, THOUSANDS_SEPARATORS))}"
            )
        if self.thousands == self.decimal:
            raise ValueError(
                f"the thousands separator cannot also be the decimal separator {self.decimal!r}"
            )

    @property
    def is_default(self) -> bool:
        """Plain ``1234.5`` text: no thousands separator, a decimal point."""
        return self.decimal == "." and self.thousands is None

    def example(self, kind: str) -> str:
        """A sample value of ``kind`` ("an integer", "a decimal number", "a number")."""
        whole = f"1{self.thousands}234" if self.thousands else "12"
        if kind == "an integer":
            return whole
        return f"{whole}{self.decimal}{'5' if kind == 'a number' else '34'}"

    def digits(self) -> str:
        """The pattern of the integer digits, grouped by thousands where declared."""
        if self.thousands is None:
            return r"\d+"
        return rf"(?:\d{{1,3}}(?:{re.escape(self.thousands)}\d{{3}})+|\d+)"

    def integer_pattern(self) -> str:
        """Integer text: digits, then optionally a decimal separator and zeros (``12.0``)."""
        return rf"^[+-]?{self.digits()}(?:{re.escape(self.decimal)}0+)?$"

    def decimal_pattern(self) -> str:
        """Decimal text: digits and an optional fraction."""
        return rf"^[+-]?{self.digits()}(?:{re.escape(self.decimal)}\d+)?$"

    def float_pattern(self) -> str:
        """Float text: a decimal, a leading-separator fraction, and an optional exponent."""
        sep = re.escape(self.decimal)
        return rf"^[+-]?(?:{self.digits()}(?:{sep}\d*)?|{sep}\d+)(?:[eE][+-]?\d+)?$"


def _plain(text: pl.Expr, seps: Separators) -> pl.Expr:
    """Text with the thousands separators removed and a ``.`` as the decimal separator."""
    out = text
    if seps.thousands is not None:
        out = out.str.replace_all(seps.thousands, "", literal=True)
    if seps.decimal != ".":
        out = out.str.replace_all(seps.decimal, ".", literal=True)
    return out


def canonical_integer(text: pl.Expr, seps: Separators) -> pl.Expr:
    """``[+-]digits`` of integer text in the declared spelling; null if it is not one."""
    plain = _plain(text, seps).str.replace(ZERO_FRACTION, "")
    return pl.when(text.str.contains(seps.integer_pattern())).then(plain)


def canonical_decimal(text: pl.Expr, seps: Separators) -> pl.Expr:
    """``[+-]digits[.digits]`` of decimal text in the declared spelling; null if not one."""
    return pl.when(text.str.contains(seps.decimal_pattern())).then(_plain(text, seps))


def canonical_float(text: pl.Expr, seps: Separators) -> pl.Expr:
    """Float text with a ``.`` decimal point; null if it is not a finite number's text."""
    return pl.when(text.str.contains(seps.float_pattern())).then(_plain(text, seps))


@dataclass(frozen=True)
class DecimalShape:
    """Patterns over canonical decimal text for ``decimal(precision, scale)``."""

    precision: int
    scale: int

    @property
    def fits(self) -> str:
        """At most ``precision - scale`` integer digits (leading zeros aside)."""
        whole = self.precision - self.scale
        digits = rf"\d{{1,{whole}}}" if whole > 0 else ""
        return rf"^[+-]?0*{digits}(?:\.|$)"

    @property
    def extra_digits(self) -> str:
        """A non-zero digit beyond ``scale`` decimals (which would need rounding)."""
        return rf"\.\d{{{self.scale}}}\d*[1-9]"

    @property
    def trim(self) -> str:
        """Captures the value without zeros beyond ``scale`` decimals (replace with group 1,
        which polars writes ``${1}``)."""
        if self.scale == 0:
            return r"^([+-]?\d+)\.\d*$"
        return rf"^([+-]?\d+\.\d{{1,{self.scale}}})\d*$"


def epoch_micros(text: pl.Expr, unit: str) -> pl.Expr:
    """Microseconds since the epoch from epoch text (exact, no float on the way); else null."""
    parts = text.str.extract_groups(EPOCH_TEXT)
    sign, whole, fraction = (parts.struct.field(str(i)) for i in range(1, 4))
    digits = EPOCH_FRACTION_DIGITS[unit]
    exact = fraction.is_null() | ~fraction.str.slice(digits).str.contains(NONZERO_DIGIT)
    fraction_value = (fraction.fill_null("") + "0" * digits).str.slice(0, digits).cast(pl.Int64)
    low, high = (bound // EPOCH_MICROS[unit] for bound in MICROS_RANGE)
    whole_value = whole.cast(pl.Int64, strict=False)
    size = whole_value * EPOCH_MICROS[unit] + fraction_value
    signed = pl.when(sign == "-").then(-size).otherwise(size)
    return pl.when(exact & whole_value.is_between(0, max(-low, high))).then(signed)


def epoch_rule(unit: str) -> str:
    """What an epoch column accepts, for reasons."""
    return (
        f"is not epoch {unit} within years 1-9999 (an integer, or a decimal with at most "
        f"{EPOCH_FRACTION_DIGITS[unit]} fraction digits)"
    )
