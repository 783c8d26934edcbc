"""One raw landing column to its contract type, in Spark expressions (see docs/spark.md).

The same rules as ``idem_assets.landing.coerce``, for the cases that matter on valid data:
each coercion yields the typed value and, per row, either null or a reason naming the
column and the rule. Failed parses use ``try_*`` functions, so ANSI mode never aborts a
read over a bad value: the row is quarantined instead.
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


def trimmed(raw: Column) -> Column:
    """Text without surrounding whitespace; blank text is null (not a value at all)."""
    text = F.regexp_replace(raw, _EDGE_SPACE, "")
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


def _type_error(name: str, raw: Column, source: T.DataType, expected: str) -> Typed:
    word = _kind(source)
    article = "an" if word[:1] in tuple("aeiou") else "a"
    reason = F.lit(f"{name}: got {article} {word} value, expected {expected}")
    return Typed(F.lit(None), F.when(raw.isNotNull(), reason))


def _failed(name: str, raw: Column, value: Column, rule: str) -> Column:
    return F.when(raw.isNotNull() & value.isNull(), _reason(name, rule, raw))


def _int_from_text(name: str, text: Column) -> Typed:
    whole = F.regexp_replace(text, r"\.0+$", "")
    value = F.when(text.rlike(_INT), whole.try_cast("bigint"))
    return Typed(value, _failed(name, text, value,
                                "is not an integer (int64, '12' and '12.0' are accepted)"))


def to_int(name: str, raw: Column, source: T.DataType) -> Typed:
    """int64 from integers, whole floats and integer text."""
    if isinstance(source, T.IntegralType):
        return Typed(raw.cast("bigint"), F.lit(None))
    if isinstance(source, (T.FloatType, T.DoubleType)):
        whole = (raw % 1.0 == 0) & (F.abs(raw) < _MAX_INT64)
        value = F.when(whole, raw.cast("bigint"))
        return Typed(value, _failed(name, raw, value, "is not a whole number within int64"))
    if isinstance(source, (T.StringType, T.DecimalType)):
        return _int_from_text(name, trimmed(raw.cast("string")))
    return _type_error(name, raw, source, "an integer")


def _money_from_number(name: str, raw: Column, source: T.DataType,
                       target: T.DecimalType) -> Typed:
    # double -> decimal goes through Java's shortest decimal text of the double, so a float
    # spelled 12.34 stays 12.34 and a genuine third decimal is seen and refused.
    exact = raw if isinstance(source, T.DecimalType) else raw.try_cast("decimal(38,18)")
    extra = exact != F.round(exact, 2)
    value = F.when(~extra, exact.try_cast(target))
    error = (
        F.when(raw.isNull(), F.lit(None))
        .when(exact.isNull(), _reason(name, "is not a decimal number like 12.34", raw))
        .when(extra, _reason(name, "has more than 2 decimal places (money is never rounded)",
                             raw))
        .when(value.isNull(), _reason(name, f"does not fit {target.simpleString()}", raw))
    )
    return Typed(value, error)


def _money_from_text(name: str, text: Column, target: T.DecimalType) -> Typed:
    number, extra = text.rlike(_NUMBER), text.rlike(_MONEY_EXTRA_DIGITS)
    fits = text.rlike(_MONEY_FITS)
    value = F.when(number & ~extra & fits,
                   F.regexp_replace(text, _MONEY_TRIM, "$1").try_cast(target))
    error = (
        F.when(text.isNull(), F.lit(None))
        .when(~number, _reason(name, "is not a decimal number like 12.34", text))
        .when(extra, _reason(name, "has more than 2 decimal places (money is never rounded)",
                             text))
        .when(value.isNull(), _reason(name, f"does not fit {target.simpleString()}", text))
    )
    return Typed(value, error)


def to_money(name: str, raw: Column, source: T.DataType, target: T.DecimalType) -> Typed:
    """decimal(18,2) from integers, decimals, floats and text with at most 2 decimals."""
    exact = isinstance(source, T.DecimalType) and source.scale <= target.scale
    if isinstance(source, T.IntegralType) or exact:
        value = raw.try_cast(target)
        return Typed(value, _failed(name, raw, value, f"does not fit {target.simpleString()}"))
    if isinstance(source, (T.FloatType, T.DoubleType, T.DecimalType)):
        return _money_from_number(name, raw, source, target)
    if isinstance(source, T.StringType):
        return _money_from_text(name, trimmed(raw), target)
    return _type_error(name, raw, source, "a decimal amount")


def to_date(name: str, raw: Column, source: T.DataType) -> Typed:
    """date from dates and YYYY-MM-DD text."""
    if isinstance(source, T.DateType):
        return Typed(raw, F.lit(None))
    if not isinstance(source, T.StringType):
        return _type_error(name, raw, source, "a date (YYYY-MM-DD)")
    text = trimmed(raw)
    shaped = text.rlike(_DATE)
    value = F.when(shaped, F.try_to_date(text, "yyyy-MM-dd"))
    error = (
        F.when(text.isNull(), F.lit(None))
        .when(~shaped, _reason(name, "is not a date in the form YYYY-MM-DD", text))
        .when(value.isNull(), _reason(name, "is not a valid calendar date", text))
    )
    return Typed(value, error)


def to_timestamp(name: str, raw: Column, source: T.DataType) -> Typed:
    """UTC timestamp from timestamps (naive = UTC) and ISO-8601 text."""
    if isinstance(source, T.TimestampType):
        return Typed(raw, F.lit(None))
    if isinstance(source, T.TimestampNTZType):
        # The session time zone is UTC (checked by the reader), so this reads the wall
        # clock as UTC, the contract's rule for naive timestamps.
        return Typed(raw.cast("timestamp"), F.lit(None))
    if not isinstance(source, T.StringType):
        return _type_error(name, raw, source, f"an ISO-8601 timestamp {TIMESTAMP_FORMS}")
    text = trimmed(raw)
    day, clock, fraction, offset = (F.regexp_extract(text, _TIMESTAMP, i) for i in range(1, 5))
    shaped = text.rlike(_TIMESTAMP)
    sub_micro = F.substring(fraction, 8, 3).rlike("[1-9]")
    utc_offset = F.when((offset == "") | (F.upper(offset) == "Z"), F.lit("+00:00")).otherwise(
        offset)
    micros = F.substring(F.concat(F.when(fraction == "", F.lit(".")).otherwise(fraction),
                                  F.lit("000000")), 1, 7)
    canonical = F.concat(day, F.lit("T"), clock, micros, utc_offset)
    value = F.when(shaped & ~sub_micro,
                   F.try_to_timestamp(canonical, F.lit(_TIMESTAMP_PATTERN)))
    error = (
        F.when(text.isNull(), F.lit(None))
        .when(~shaped, _reason(name, f"is not an ISO-8601 timestamp {TIMESTAMP_FORMS}", text))
        .when(sub_micro, _reason(name, "has sub-microsecond precision", text))
        .when(value.isNull(), _reason(name, "is not a valid date and time", text))
    )
    return Typed(value, error)


def to_string(name: str, raw: Column, source: T.DataType) -> Typed:
    """UTF-8 text from text, bytes, scalars (their text) and structs/lists (their JSON)."""
    if isinstance(source, T.StringType):
        return Typed(raw, F.lit(None))
    if isinstance(source, T.BinaryType):
        value = F.try_validate_utf8(raw.cast("string"))
        reason = F.lit(f"{name}: binary value cannot be read as UTF-8 text")
        return Typed(value, F.when(raw.isNotNull() & value.isNull(), reason))
    if isinstance(source, (T.StructType, T.ArrayType, T.MapType)):
        return Typed(F.to_json(raw), F.lit(None))
    return Typed(raw.cast("string"), F.lit(None))


def coerce(name: str, raw: Column, source: T.DataType, target: pa.DataType) -> Typed:
    """The contract-typed value of a raw column (Spark type ``source``) and its errors."""
    kind = spark_type(target)
    if isinstance(source, T.NullType):
        return Typed(F.lit(None).cast(kind), F.lit(None).cast("string"))
    if pa.types.is_int64(target):
        result = to_int(name, raw, source)
    elif pa.types.is_decimal(target):
        assert isinstance(kind, T.DecimalType)
        result = to_money(name, raw, source, kind)
    elif pa.types.is_date32(target):
        result = to_date(name, raw, source)
    elif pa.types.is_timestamp(target):
        result = to_timestamp(name, raw, source)
    elif pa.types.is_string(target):
        result = to_string(name, raw, source)
    else:
        raise TypeError(f"contract type {target} of column {name} has no Spark coercion")
    value, error = result.value.cast(kind), result.error.cast("string")
    if not isinstance(source, T.StringType):
        return Typed(value, error)
    too_big = F.octet_length(raw) > MAX_FIELD_BYTES
    bound = F.concat(F.lit(f"{name}: value is "), F.octet_length(raw).cast("string"),
                     F.lit(f" bytes, over the {MAX_FIELD_BYTES}-byte bound for one field"))
    return Typed(F.when(too_big, F.lit(None).cast(kind)).otherwise(value),
                 F.when(too_big, bound).otherwise(error))
