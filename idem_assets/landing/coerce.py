"""Turning one raw column of whatever type arrived into its contract type, vectorised.

Each coercion yields the typed value and, per row, either null or a reason that names the
column, shows the value and says which rule it broke. Nothing is rounded or guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from idem_assets.landing.raw import MAX_FIELD_BYTES

_INT = r"^[+-]?\d+(?:\.0+)?$"
_NUMBER = r"^[+-]?\d+(?:\.\d+)?$"
_MONEY_FITS = r"^[+-]?0*\d{1,16}(?:\.|$)"
_MONEY_EXTRA_DIGITS = r"\.\d{2}\d*[1-9]"
_MONEY_TRIM = r"^([+-]?\d+\.\d{1,2})\d*$"
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_TIMESTAMP = r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$"
_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%:z"
_SHOWN_CHARS = 60
TIMESTAMP_FORMS = "YYYY-MM-DD[T| ]hh:mm:ss[.f up to 9 digits][Z|+hh:mm|-hh:mm]"


@dataclass(frozen=True)
class Coerced:
    """A contract column's typed value and its per-row problem (null when fine).

    A row is bad exactly when ``present`` holds but the typed value is null, so callers
    can find bad rows cheaply and compute the reason text (the costly part) only for them.
    """

    value: pl.Expr
    error: pl.Expr
    present: pl.Expr = field(default_factory=lambda: pl.lit(True))


def polars_type(target: pa.DataType) -> pl.DataType:
    """The polars dtype that converts to ``target`` in Arrow."""
    return pl.Series(pa.array([], target)).dtype


def shown(expr: pl.Expr) -> pl.Expr:
    """A value as short text for a reason message."""
    text = expr.cast(pl.String, strict=False)
    return (
        pl.when(text.str.len_chars() > _SHOWN_CHARS)
        .then(text.str.slice(0, _SHOWN_CHARS) + pl.lit("..."))
        .otherwise(text)
    )


def _value_reason(name: str, rule: str, value: pl.Expr) -> pl.Expr:
    return pl.format(f"{name}: value '{{}}' {rule}", shown(value))


def type_name(dtype: pl.DataType) -> str:
    """A plain word for a raw column type, for reason messages."""
    if dtype.is_integer():
        return "integer"
    if dtype.is_float():
        return "float"
    kinds = {pl.Datetime: "timestamp", pl.Date: "date", pl.Boolean: "boolean", pl.Struct: "object",
             pl.List: "list", pl.Array: "list", pl.Binary: "binary", pl.Decimal: "decimal",
             pl.Time: "time of day", pl.Duration: "duration"}
    return next((word for kind, word in kinds.items() if isinstance(dtype, kind)), str(dtype))


def _type_error(name: str, raw: pl.Expr, dtype: pl.DataType, expected: str) -> Coerced:
    word = type_name(dtype)
    article = "an" if word[:1] in tuple("aeiou") else "a"
    reason = pl.lit(f"{name}: got {article} {word} value, expected {expected}")
    return Coerced(pl.lit(None), pl.when(raw.is_not_null()).then(reason))


def _text(raw: pl.Expr) -> pl.Expr:
    """Trimmed text of a value headed for a non-string type; blank counts as null."""
    trimmed = raw.cast(pl.String).str.strip_chars()
    return pl.when(trimmed.str.len_bytes() > 0).then(trimmed)


def _int_from_text(name: str, text: pl.Expr) -> Coerced:
    value = pl.when(text.str.contains(_INT)).then(
        text.str.replace(r"\.0+$", "").cast(pl.Int64, strict=False)
    )
    rule = "is not an integer (int64, '12' and '12.0' are accepted)"
    return Coerced(value, pl.when(text.is_not_null() & value.is_null()).then(
        _value_reason(name, rule, text)))


def to_int(name: str, raw: pl.Expr, dtype: pl.DataType) -> Coerced:
    """int64 from integers, whole floats and integer text."""
    if dtype.is_integer():
        value = raw.cast(pl.Int64, strict=False)
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, "is outside int64", raw)))
    if dtype.is_float():
        whole = raw.is_finite() & (raw == raw.floor()) & (raw.abs() < 2.0**63)
        value = pl.when(whole).then(raw.cast(pl.Int64, strict=False))
        rule = "is not a whole number within int64"
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, rule, raw)))
    if dtype == pl.String or isinstance(dtype, pl.Decimal):
        return _int_from_text(name, _text(raw))
    return _type_error(name, raw, dtype, "an integer")


def to_money(name: str, raw: pl.Expr, dtype: pl.DataType, target: pl.DataType) -> Coerced:
    """decimal(18,2) from integers and decimal text/numbers with at most 2 decimals."""
    exact = isinstance(dtype, pl.Decimal) and (dtype.scale or 0) <= 2
    if dtype.is_integer() or exact:
        value = raw.cast(target, strict=False)
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, f"does not fit {target}", raw)))
    if not (dtype == pl.String or dtype.is_float() or isinstance(dtype, pl.Decimal)):
        return _type_error(name, raw, dtype, "a decimal amount")
    text = _text(raw)
    number = text.str.contains(_NUMBER)
    extra = text.str.contains(_MONEY_EXTRA_DIGITS)
    fits = text.str.contains(_MONEY_FITS)
    value = pl.when(number & ~extra & fits).then(
        text.str.replace(_MONEY_TRIM, "${1}").cast(target, strict=False)
    )
    error = (
        pl.when(text.is_null()).then(pl.lit(None, pl.String))
        .when(~number).then(_value_reason(name, "is not a decimal number like 12.34", text))
        .when(extra).then(
            _value_reason(name, "has more than 2 decimal places (money is never rounded)", text))
        .when(value.is_null()).then(_value_reason(name, f"does not fit {target}", text))
    )
    return Coerced(value, error)


def to_date(name: str, raw: pl.Expr, dtype: pl.DataType) -> Coerced:
    """date32 from dates and YYYY-MM-DD text."""
    if dtype == pl.Date:
        return Coerced(raw, pl.lit(None, pl.String))
    if dtype != pl.String:
        return _type_error(name, raw, dtype, "a date (YYYY-MM-DD)")
    text = _text(raw)
    shaped = text.str.contains(_DATE)
    value = pl.when(shaped).then(text.str.to_date("%Y-%m-%d", strict=False))
    error = (
        pl.when(text.is_null()).then(pl.lit(None, pl.String))
        .when(~shaped).then(_value_reason(name, "is not a date in the form YYYY-MM-DD", text))
        .when(value.is_null()).then(_value_reason(name, "is not a valid calendar date", text))
    )
    return Coerced(value, error)


def to_timestamp(name: str, raw: pl.Expr, dtype: pl.DataType) -> Coerced:
    """timestamp[us, UTC] from timestamps (naive = UTC) and ISO-8601 text."""
    target = pl.Datetime("us", "UTC")
    if isinstance(dtype, pl.Datetime):
        utc = raw.dt.replace_time_zone("UTC") if dtype.time_zone is None else (
            raw.dt.convert_time_zone("UTC"))
        if dtype.time_unit != "ns":
            return Coerced(utc.cast(target), pl.lit(None, pl.String))
        sub_micro = raw.dt.nanosecond() % 1000 != 0
        value = pl.when(~sub_micro).then(utc.cast(target))
        rule = "has sub-microsecond precision (it would be truncated)"
        return Coerced(value, pl.when(sub_micro).then(_value_reason(name, rule, raw)))
    if dtype != pl.String:
        return _type_error(name, raw, dtype, f"an ISO-8601 timestamp {TIMESTAMP_FORMS}")
    text = _text(raw)
    parts = text.str.extract_groups(_TIMESTAMP)
    day, clock, fraction, offset = (parts.struct.field(str(i)) for i in range(1, 5))
    sub_micro = fraction.str.slice(7).str.contains("[1-9]")
    utc_offset = pl.when(offset.is_null() | (offset.str.to_uppercase() == "Z")).then(
        pl.lit("+00:00")).otherwise(offset)
    canonical = pl.concat_str(
        [day, pl.lit("T"), clock, (fraction.fill_null(".") + "000000").str.slice(0, 7), utc_offset]
    )
    parsed = canonical.str.to_datetime(
        _TIMESTAMP_FORMAT, time_unit="us", time_zone="UTC", strict=False
    )
    value = pl.when(day.is_not_null() & ~sub_micro.fill_null(False)).then(parsed)
    error = (
        pl.when(text.is_null()).then(pl.lit(None, pl.String))
        .when(day.is_null()).then(
            _value_reason(name, f"is not an ISO-8601 timestamp {TIMESTAMP_FORMS}", text))
        .when(sub_micro).then(_value_reason(name, "has sub-microsecond precision", text))
        .when(value.is_null()).then(_value_reason(name, "is not a valid date and time", text))
    )
    return Coerced(value, error)


def _decode_utf8(values: pl.Series) -> pl.Series:
    # polars has no lenient bytes-to-text cast; raw binary columns are rare (Parquet only).
    def decode(value: bytes | None) -> str | None:
        try:
            return None if value is None else value.decode("utf-8")
        except UnicodeDecodeError:
            return None

    return pl.Series(values.name, [decode(v) for v in values.to_list()], dtype=pl.String)


def to_string(name: str, raw: pl.Expr, dtype: pl.DataType) -> Coerced:
    """UTF-8 text from text, bytes, scalars (their text form) and structs (their JSON)."""
    if dtype == pl.String:
        return Coerced(raw, pl.lit(None, pl.String))
    if dtype == pl.Binary:
        value = raw.map_batches(_decode_utf8, return_dtype=pl.String)
    elif isinstance(dtype, pl.Struct):
        value = raw.struct.json_encode()
    else:
        value = raw.cast(pl.String, strict=False)
    bad = raw.is_not_null() & value.is_null()
    reason = pl.lit(f"{name}: {type_name(dtype)} value cannot be read as UTF-8 text")
    return Coerced(value, pl.when(bad).then(reason))


def coerce(name: str, target: pa.DataType, dtype: pl.DataType) -> Coerced:
    """The contract-typed value of raw column ``name`` (polars type ``dtype``) and its errors."""
    raw = pl.col(name)
    kind = polars_type(target)
    if dtype == pl.Null:
        return Coerced(pl.lit(None, kind), pl.lit(None, pl.String), pl.lit(False))
    if pa.types.is_int64(target):
        result = to_int(name, raw, dtype)
    elif pa.types.is_decimal(target):
        result = to_money(name, raw, dtype, kind)
    elif pa.types.is_date32(target):
        result = to_date(name, raw, dtype)
    elif pa.types.is_timestamp(target):
        result = to_timestamp(name, raw, dtype)
    elif pa.types.is_string(target):
        result = to_string(name, raw, dtype)
    else:
        raise TypeError(f"contract type {target} of column {name} has no coercion")
    if dtype != pl.String:
        return Coerced(result.value.cast(kind), result.error, raw.is_not_null())
    present = raw.is_not_null() if pa.types.is_string(target) else _text(raw).is_not_null()
    too_big = raw.str.len_bytes() > MAX_FIELD_BYTES
    bound = pl.format(
        f"{name}: value is {{}} bytes, over the {MAX_FIELD_BYTES}-byte bound for one field",
        raw.str.len_bytes(),
    )
    return Coerced(
        pl.when(too_big).then(pl.lit(None, kind)).otherwise(result.value.cast(kind)),
        pl.when(too_big).then(bound).otherwise(result.error),
        present,
    )
