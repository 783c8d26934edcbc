"""One raw landing column to its contract type, in Spark expressions (see docs/spark.md).

The same rules as ``idem_assets.landing.coerce``, for the cases that matter on valid data:
each coercion yields the typed value and, per row, either null or a reason naming the
column and the rule. Failed parses use ``try_*`` functions, so ANSI mode never aborts a
read over a bad value: the row is quarantined instead.

Values and reasons are computed in separate projections: a reason refers to the typed
value through ``Refs.typed`` instead of repeating its expression, which keeps the
generated code small enough for Spark to compile.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from idem_assets.landing.coerce import TIMESTAMP_FORMS
from idem_assets.landing.raw import MAX_FIELD_BYTES
from idem_assets.spark.schema import spark_type

# The regexes of idem_assets.landing.coerce, in Java syntax.
_INT = r"^[+-]?\d+(?:\.0+)?$"
_NUMBER = r"^[+-]?\d+(?:\.\d+)?$"
_MONEY_FITS = r"^[+-]?0*\d{1,16}(?:\.|$)"
_MONEY_EXTRA_DIGITS = r"\.\d{2}\d*[1-9]"
_MONEY_TRIM = r"^([+-]?\d+\.\d{1,2})\d*$"
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_TIMESTAMP = r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$"
_TIMESTAMP_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
# Unicode-aware trim, like Polars' strip_chars (Java's \s is ASCII-only without (?U)).
_EDGE_SPACE = r"(?U)^\s+|\s+$"
_SHOWN_CHARS = 60
_MAX_INT64 = 9.223372036854775807e18


def no_error() -> Column:
    """The reason of a value that is fine."""
    return F.lit(None).cast("string")


@dataclass(frozen=True)
class Refs:
    """Columns a coercion may refer to: the raw value, its stripped text, the typed value."""

    raw: Column
    text: Column  # stripped non-blank text (only meaningful when needs_text)
    typed: Column  # the value column, once computed (used by reasons only)


@dataclass(frozen=True)
class Typed:
    """A contract column's typed value and its per-row problem (null when fine)."""

    value: Column
    error: Column


def shown(value: Column) -> Column:
    """A value as short text for a reason message."""
    text = value.cast("string")
    return F.when(F.length(text) > _SHOWN_CHARS,
                  F.concat(F.substring(text, 1, _SHOWN_CHARS), F.lit("..."))).otherwise(text)


def stripped(raw: Column) -> Column:
    """Text without surrounding whitespace (Unicode-aware, like the local reader)."""
    return F.regexp_replace(raw, _EDGE_SPACE, "")


def non_blank(text: Column) -> Column:
    """Stripped text, or null when nothing is left (blank is not a value at all)."""
    return F.when(F.length(text) > 0, text)


def _reason(name: str, rule: str, value: Column) -> Column:
    return F.concat(F.lit(f"{name}: value '"), shown(value), F.lit(f"' {rule}"))


def _kind(source: T.DataType) -> str:
    words = [(T.IntegralType, "integer"), (T.FractionalType, "number"),
             (T.TimestampType, "timestamp"), (T.TimestampNTZType, "timestamp"),
             (T.DateType, "date"), (T.BooleanType, "boolean"), (T.StructType, "object"),
             (T.ArrayType, "list"), (T.MapType, "object"), (T.BinaryType, "binary")]
    return next((word for kind, word in words if isinstance(source, kind)),
                source.simpleString())


def _type_error(name: str, refs: Refs, source: T.DataType, expected: str) -> Typed:
    word = _kind(source)
    article = "an" if word[:1] in tuple("aeiou") else "a"
    reason = F.lit(f"{name}: got {article} {word} value, expected {expected}")
    return Typed(F.lit(None), F.when(refs.raw.isNotNull(), reason))


def _failed(name: str, given: Column, refs: Refs, rule: str) -> Column:
    return F.when(given.isNotNull() & refs.typed.isNull(), _reason(name, rule, given))


def to_int(name: str, refs: Refs, source: T.DataType) -> Typed:
    """int64 from integers, whole floats and integer text."""
    raw = refs.raw
    if isinstance(source, T.IntegralType):
        return Typed(raw.cast("bigint"), no_error())
    if isinstance(source, (T.FloatType, T.DoubleType)):
        whole = (raw % 1.0 == 0) & (F.abs(raw) < _MAX_INT64)
        value = F.when(whole, raw.cast("bigint"))
        return Typed(value, _failed(name, raw, refs, "is not a whole number within int64"))
    if not isinstance(source, (T.StringType, T.DecimalType)):
        return _type_error(name, refs, source, "an integer")
    text = refs.text if isinstance(source, T.StringType) else raw.cast("string")
    value = F.when(text.rlike(_INT), F.regexp_replace(text, r"\.0+$", "").try_cast("bigint"))
    return Typed(value, _failed(
        name, text, refs, "is not an integer (int64, '12' and '12.0' are accepted)"))


def _money_from_number(name: str, refs: Refs, source: T.DataType,
                       target: T.DecimalType) -> Typed:
    # double -> decimal goes through Java's shortest decimal text of the double, so a float
    # spelled 12.34 stays 12.34 and a genuine third decimal is seen and refused.
    raw = refs.raw
    exact = raw if isinstance(source, T.DecimalType) else raw.try_cast("decimal(38,18)")
    extra = exact != F.round(exact, 2)
    value = F.when(~extra, exact.try_cast(target))
    error = (
        F.when(raw.isNull(), no_error())
        .when(exact.isNull(), _reason(name, "is not a decimal number like 12.34", raw))
        .when(extra, _reason(name, "has more than 2 decimal places (money is never rounded)",
                             raw))
        .when(refs.typed.isNull(), _reason(name, f"does not fit {target.simpleString()}", raw))
    )
    return Typed(value, error)


def _money_from_text(name: str, refs: Refs, target: T.DecimalType) -> Typed:
    text = refs.text
    number, extra = text.rlike(_NUMBER), text.rlike(_MONEY_EXTRA_DIGITS)
    value = F.when(number & ~extra & text.rlike(_MONEY_FITS),
                   F.regexp_replace(text, _MONEY_TRIM, "$1").try_cast(target))
    error = (
        F.when(text.isNull(), no_error())
        .when(~number, _reason(name, "is not a decimal number like 12.34", text))
        .when(extra, _reason(name, "has more than 2 decimal places (money is never rounded)",
                             text))
        .when(refs.typed.isNull(), _reason(name, f"does not fit {target.simpleString()}", text))
    )
    return Typed(value, error)


def to_money(name: str, refs: Refs, source: T.DataType, target: T.DecimalType) -> Typed:
    """decimal(18,2) from integers, decimals, floats and text with at most 2 decimals."""
    exact = isinstance(source, T.DecimalType) and source.scale <= target.scale
    if isinstance(source, T.IntegralType) or exact:
        return Typed(refs.raw.try_cast(target), _failed(
            name, refs.raw, refs, f"does not fit {target.simpleString()}"))
    if isinstance(source, (T.FloatType, T.DoubleType, T.DecimalType)):
        return _money_from_number(name, refs, source, target)
    if isinstance(source, T.StringType):
        return _money_from_text(name, refs, target)
    return _type_error(name, refs, source, "a decimal amount")


def to_date(name: str, refs: Refs, source: T.DataType) -> Typed:
    """date from dates and YYYY-MM-DD text."""
    if isinstance(source, T.DateType):
        return Typed(refs.raw, no_error())
    if not isinstance(source, T.StringType):
        return _type_error(name, refs, source, "a date (YYYY-MM-DD)")
    text = refs.text
    value = F.when(text.rlike(_DATE), F.try_to_date(text, "yyyy-MM-dd"))
    error = (
        F.when(text.isNull(), no_error())
        .when(~text.rlike(_DATE), _reason(name, "is not a date in the form YYYY-MM-DD", text))
        .when(refs.typed.isNull(), _reason(name, "is not a valid calendar date", text))
    )
    return Typed(value, error)


def to_timestamp(name: str, refs: Refs, source: T.DataType) -> Typed:
    """UTC timestamp from timestamps (naive = UTC) and ISO-8601 text."""
    raw = refs.raw
    if isinstance(source, T.TimestampType):
        return Typed(raw, no_error())
    if isinstance(source, T.TimestampNTZType):
        # The session time zone is UTC (checked by the reader), so this reads the wall
        # clock as UTC, the contract's rule for naive timestamps.
        return Typed(raw.cast("timestamp"), no_error())
    if not isinstance(source, T.StringType):
        return _type_error(name, refs, source, f"an ISO-8601 timestamp {TIMESTAMP_FORMS}")
    text = refs.text
    day, clock, fraction, offset = (F.regexp_extract(text, _TIMESTAMP, i) for i in range(1, 5))
    sub_micro = F.substring(F.regexp_extract(text, _TIMESTAMP, 3), 8, 3).rlike("[1-9]")
    utc_offset = F.when((offset == "") | (F.upper(offset) == "Z"), F.lit("+00:00")).otherwise(
        offset)
    micros = F.substring(F.concat(F.when(fraction == "", F.lit(".")).otherwise(fraction),
                                  F.lit("000000")), 1, 7)
    canonical = F.concat(day, F.lit("T"), clock, micros, utc_offset)
    value = F.when(text.rlike(_TIMESTAMP) & ~sub_micro,
                   F.try_to_timestamp(canonical, F.lit(_TIMESTAMP_PATTERN)))
    error = (
        F.when(text.isNull(), no_error())
        .when(~text.rlike(_TIMESTAMP),
              _reason(name, f"is not an ISO-8601 timestamp {TIMESTAMP_FORMS}", text))
        .when(sub_micro, _reason(name, "has sub-microsecond precision", text))
        .when(refs.typed.isNull(), _reason(name, "is not a valid date and time", text))
    )
    return Typed(value, error)


def to_string(name: str, refs: Refs, source: T.DataType) -> Typed:
    """UTF-8 text from text, bytes, scalars (their text) and structs/lists (their JSON)."""
    raw = refs.raw
    if isinstance(source, T.StringType):
        return Typed(raw, no_error())
    if isinstance(source, T.BinaryType):
        reason = F.lit(f"{name}: binary value cannot be read as UTF-8 text")
        return Typed(F.try_validate_utf8(raw.cast("string")),
                     F.when(raw.isNotNull() & refs.typed.isNull(), reason))
    if isinstance(source, (T.StructType, T.ArrayType, T.MapType)):
        return Typed(F.to_json(raw), no_error())
    return Typed(raw.cast("string"), no_error())


def needs_text(source: T.DataType, target: pa.DataType) -> bool:
    """Whether coercing needs the column's stripped text (text headed for a non-string type)."""
    return isinstance(source, T.StringType) and not pa.types.is_string(target)


def coerce(name: str, refs: Refs, source: T.DataType, target: pa.DataType) -> Typed:
    """The contract-typed value of a raw column (Spark type ``source``) and its reason.

    The value refers to ``refs.raw`` and ``refs.text``; the reason also to ``refs.typed``,
    so it must be evaluated in a projection after the one that computes the value.
    """
    kind = spark_type(target)
    if isinstance(source, T.NullType):
        return Typed(F.lit(None).cast(kind), no_error())
    if pa.types.is_int64(target):
        result = to_int(name, refs, source)
    elif pa.types.is_decimal(target):
        assert isinstance(kind, T.DecimalType)
        result = to_money(name, refs, source, kind)
    elif pa.types.is_date32(target):
        result = to_date(name, refs, source)
    elif pa.types.is_timestamp(target):
        result = to_timestamp(name, refs, source)
    elif pa.types.is_string(target):
        result = to_string(name, refs, source)
    else:
        raise TypeError(f"contract type {target} of column {name} has no Spark coercion")
    value, error = result.value.cast(kind), result.error.cast("string")
    if not isinstance(source, T.StringType):
        return Typed(value, error)
    size = F.octet_length(refs.raw)
    bound = F.concat(F.lit(f"{name}: value is "), size.cast("string"),
                     F.lit(f" bytes, over the {MAX_FIELD_BYTES}-byte bound for one field"))
    return Typed(F.when(size > MAX_FIELD_BYTES, F.lit(None).cast(kind)).otherwise(value),
                 F.when(size > MAX_FIELD_BYTES, bound).otherwise(error))
