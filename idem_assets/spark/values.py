"""What every Spark coercion shares: raw columns with their kind, typed results, value text.

A raw column's *kind* is the word the local reader's ``type_name`` gives its Polars type
("integer", "float", "decimal", "string", "timestamp"...), so type errors read alike on
both engines. Text shown in reasons is spelled the way Polars casts a value to text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing.coerce import SHOWN_CHARS, TIMESTAMP_FORMS

# Unicode-aware trim, like Polars' strip_chars (Java's \s is ASCII-only without (?U)).
_EDGE_SPACE = r"(?U)^\s+|\s+$"
# Polars writes floats in plain notation inside [1e-5, 1e16), in scientific outside.
_PLAIN_FLOATS = (1e-5, 1e16)
# Wide enough for every plain float: 16 integer digits, 22 fraction digits.
_FLOAT_DIGITS = "decimal(38,22)"


@dataclass(frozen=True)
class Stages:
    """Intermediate columns of one contract column, computed in projections before its value.

    A coercion stages what its value and reason both refer to (regex extracts, parses), so
    Spark evaluates it once per row and the generated code holds it once: repeated inside
    conditional branches, it would be neither shared nor small enough to compile.
    """

    prefix: str
    levels: list[dict[str, Column]] = field(default_factory=list)

    def add(self, name: str, expr: Column, level: int = 0) -> Column:
        """Stage ``expr`` (it may refer to staged columns of lower levels); its column."""
        while len(self.levels) <= level:
            self.levels.append({})
        key = f"{self.prefix}{name}"
        self.levels[level][key] = expr
        return F.col(key)

    def child(self, name: str) -> Stages:
        """Stages under a longer prefix, computed with these (for one kind of JSON value)."""
        return Stages(f"{self.prefix}{name}_", self.levels)


@dataclass(frozen=True)
class Raw:
    """One raw column as a coercion sees it: its values, their kind, their stripped text."""

    value: Column
    kind: str
    # The text a value is judged by, computed in an earlier projection: stripped, non-blank
    # text of strings headed for a non-string type; Polars' text of floats (``judged_text``).
    text: Column | None = None
    scale: int | None = None  # decimals: their scale
    zoned: bool = True  # timestamps: instants (True) or wall-clock times (False)
    fraction_digits: int = 6  # timestamps: the digits Polars prints (3 for ms, 6 for us)
    stages: Stages | None = None  # where intermediate columns go (None: kept inline)
    # JSON numbers among text values: true where the text is a JSON number, judged in
    # JSON's own spelling (default separators) rather than the source's declared one.
    json_number: Column | None = None

    def stage(self, name: str, expr: Column, level: int = 0) -> Column:
        """``expr`` as a staged column when the judge stages this column, else itself."""
        return self.stages.add(name, expr, level) if self.stages is not None else expr


@dataclass(frozen=True)
class Typed:
    """A contract column's typed value and its per-row problem (null when fine).

    As in the local reader, a row is bad exactly where ``present`` holds but the value is
    null: rows are judged by that cheap test, and the reason text is only built for them.
    """

    value: Column
    error: Column
    present: Column | None = None  # set by ``coerce`` (None inside the coercions)


def no_error() -> Column:
    """The reason of a value that is fine."""
    return F.lit(None).cast("string")


def stripped(raw: Column) -> Column:
    """Text without surrounding whitespace (Unicode-aware, like the local reader)."""
    return F.regexp_replace(raw, _EDGE_SPACE, "")


def non_blank(text: Column) -> Column:
    """Stripped text, or null when nothing is left (blank is not a value at all)."""
    return F.when(F.length(text) > 0, text)


def float_text(value: Column) -> Column:
    """A float as Polars spells it: ``12.5``, ``100.0``, ``1e+16``, ``2.5e-7``, ``NaN``, ``inf``."""
    java = value.cast("string")  # Java's shortest digits: 12.5, 1.0E7, 2.5E-7, Infinity
    # Zeros after the first decimal trimmed: 100.0000 -> 100.0, 12.3400 -> 12.34.
    plain = F.regexp_replace(java.try_cast(_FLOAT_DIGITS).cast("string"), r"(\.\d+?)0+$", "$1")
    mantissa = F.regexp_replace(F.regexp_replace(java, r"\.0E", "E"), r"E(\d)", "E+$1")
    scientific = F.replace(mantissa, F.lit("E"), F.lit("e"))
    size = F.abs(value)
    return (
        F.when(F.isnan(value), F.lit("NaN"))
        .when(value == float("inf"), F.lit("inf"))
        .when(value == float("-inf"), F.lit("-inf"))
        .when(value == 0, java)
        .when((size >= _PLAIN_FLOATS[0]) & (size < _PLAIN_FLOATS[1]), plain)
        .otherwise(scientific)
    )


def timestamp_text(value: Column, zoned: bool, fraction_digits: int = 6) -> Column:
    """A timestamp as Polars spells it: ``2024-03-01 10:00:00.000000[+00:00]``."""
    fraction = "." + "S" * fraction_digits if fraction_digits else ""
    return F.date_format(value, f"yyyy-MM-dd HH:mm:ss{fraction}{'xxx' if zoned else ''}")


def judged_text(kind: str, target: pa.DataType) -> str | None:
    """Which text a raw kind needs staged for a target: "stripped" (strings headed for a
    non-string type), "float" (floats judged or shown by their text), or None."""
    if kind == "string" and not pa.types.is_string(target):
        return "stripped"
    if kind == "float" and (
        pa.types.is_integer(target) or pa.types.is_decimal(target) or pa.types.is_timestamp(target)
    ):
        return "float"
    return None


def raw_text(raw: Raw) -> Column:
    """A raw value as text, spelled as Polars casts it (floats and timestamps its own way)."""
    if raw.kind == "float":
        return float_text(raw.value) if raw.text is None else raw.text
    if raw.kind == "timestamp":
        return timestamp_text(raw.value, raw.zoned, raw.fraction_digits)
    return raw.value.cast("string")


def typed_text(value: Column, kind: pa.DataType) -> Column:
    """A contract-typed value as text, spelled as Polars casts it (for rule reasons)."""
    if pa.types.is_floating(kind):
        return float_text(value)
    if pa.types.is_timestamp(kind):
        return timestamp_text(value, kind.tz is not None)
    return value.cast("string")


def shown(text: Column) -> Column:
    """Text cut short for a reason message (its first ``SHOWN_CHARS`` characters, then "...")."""
    return F.when(
        F.length(text) > SHOWN_CHARS, F.concat(F.substring(text, 1, SHOWN_CHARS), F.lit("..."))
    ).otherwise(text)


def value_reason(name: str, rule: str, text: Column) -> Column:
    """``<name>: value '<text>' <rule>``, the local reader's reason for a bad value."""
    return F.concat(F.lit(f"{name}: value '"), shown(text), F.lit(f"' {rule}"))


def value_reasons(name: str, text: Column, rules: Sequence[tuple[Column, Column | str]]) -> Column:
    """The reason of the first rule whose condition holds (null if none, or no text).

    Every rule shares one ``<name>: value '<text>' `` prefix, so the text is shown once in
    the generated code however many rules a coercion has.
    """
    rule: Column | None = None
    for condition, words in rules:
        said = F.lit(words) if isinstance(words, str) else words
        rule = F.when(condition, said) if rule is None else rule.when(condition, said)
    assert rule is not None
    return F.concat(F.lit(f"{name}: value '"), shown(text), F.lit("' "), rule)


def expected_form(target: pa.DataType, epoch: str | None = None) -> str:
    """What a contract type takes, as a type error names it ("an integer", "a boolean"...)."""
    if pa.types.is_integer(target):
        return "an integer"
    if pa.types.is_decimal(target):
        return "a decimal number"
    if pa.types.is_floating(target):
        return "a number"
    if pa.types.is_boolean(target):
        return "a boolean"
    if pa.types.is_date(target):
        return "a date (YYYY-MM-DD)"
    if pa.types.is_timestamp(target):
        return f"epoch {epoch} (a number)" if epoch else f"an ISO-8601 timestamp {TIMESTAMP_FORMS}"
    raise TypeError(f"contract type {target} takes values of every kind")


def with_article(kind: str) -> str:
    """``an integer``, ``a float``: a kind as a type error names it."""
    return f"{'an' if kind[:1] in tuple('aeiou') else 'a'} {kind}"


def type_error(name: str, raw: Raw, target: pa.DataType, epoch: str | None = None) -> Typed:
    """A value of a kind the target type does not take at all."""
    reason = F.lit(
        f"{name}: got {with_article(raw.kind)} value, expected {expected_form(target, epoch)}"
    )
    return Typed(F.lit(None), F.when(raw.value.isNotNull(), reason))
