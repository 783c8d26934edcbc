"""Turning one raw column of whatever type arrived into its contract type, vectorised.

Each coercion yields the typed value and, per row, either null or a reason that names the
column, shows the value and says which rule it broke. Nothing is rounded or guessed: a
value is read the way the source's declaration says its files write it (time zone of
naive timestamps, epoch units, decimal and thousands separators) or it is quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.landing import numbers
from idem_assets.landing.contract import EpochUnit, SourceContract
from idem_assets.landing.raw import MAX_FIELD_BYTES

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
# Date, T or space, time, optional fraction of 0-9 digits, optional offset (Z, +hh:mm,
# +hhmm or +hh), optionally after one space (as strftime's "%Y-%m-%d %H:%M:%S %z" writes).
TIMESTAMP_PATTERN = (
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:[.,](\d{0,9}))?"
    r" ?([Zz]|[+-]\d{2}(?::?\d{2})?)?$"
)
# chrono (strftime) syntax, as polars parses it.
_DATE_FORMAT = "%Y-%m-%d"
_ZONED_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%:z"
_NAIVE_FORMAT = "%Y-%m-%dT%H:%M:%S%.f"
# A value longer than this is cut short in a reason message (on both engines).
SHOWN_CHARS = 60
TIMESTAMP_FORMS = (
    "YYYY-MM-DD[T| ]hh:mm:ss[.f up to 9 digits][Z|+hh:mm|+hhmm|+hh] "
    "(no offset: the source's time zone)"
)
BOOL_TRUE = ("true", "1", "yes")
BOOL_FALSE = ("false", "0", "no")
INT32_RANGE = (-(2**31), 2**31 - 1)
# A whole float of smaller magnitude than this is an int64.
INT64_FLOAT_BOUND = 2.0**63


@dataclass(frozen=True)
class Coerced:
    """A contract column's typed value and its per-row problem (null when fine).

    A row is bad exactly when ``present`` holds but the typed value is null, so callers
    can find bad rows cheaply and compute the reason text (the costly part) only for them.
    """

    value: pl.Expr
    error: pl.Expr
    present: pl.Expr = field(default_factory=lambda: pl.lit(True))


@dataclass(frozen=True)
class ReadAs:
    """How one column's raw values are spelled in the source's files."""

    timezone: str = "UTC"
    epoch: EpochUnit | None = None
    separators: numbers.Separators = numbers.Separators()
    max_bytes: int = MAX_FIELD_BYTES
    format: str | None = None  # strftime format of date and timestamp text

    @classmethod
    def of(cls, contract: SourceContract, column: str) -> ReadAs:
        """The reading options a contract declares for ``column``."""
        declared = contract.column(column)
        return cls(
            contract.timezone,
            declared.epoch,
            contract.separators,
            contract.max_field_bytes,
            declared.format,
        )


def polars_type(target: pa.DataType) -> pl.DataType:
    """The polars dtype that converts to ``target`` in Arrow."""
    return pl.Series(pa.array([], target)).dtype


def shown(expr: pl.Expr) -> pl.Expr:
    """A value as short text for a reason message."""
    text = expr.cast(pl.String, strict=False)
    return (
        pl.when(text.str.len_chars() > SHOWN_CHARS)
        .then(text.str.slice(0, SHOWN_CHARS) + pl.lit("..."))
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
    kinds = {
        pl.Datetime: "timestamp",
        pl.Date: "date",
        pl.Boolean: "boolean",
        pl.Struct: "object",
        pl.List: "list",
        pl.Array: "list",
        pl.Binary: "binary",
        pl.Decimal: "decimal",
        pl.Time: "time of day",
        pl.Duration: "duration",
    }
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


def _number_reason(name: str, text: pl.Expr, kind: str, read_as: ReadAs) -> pl.Expr:
    """'not a number' with the declared separators and, where it helps, the setting to use."""
    example = read_as.separators.example(kind)
    base = _value_reason(name, f"is not {kind} like {example}", text)
    hint = numbers.SEPARATOR_HINT
    if read_as.separators.is_default:
        return (
            pl.when(text.str.contains(",", literal=True))
            .then(pl.concat_str([base, pl.lit(hint)]))
            .otherwise(base)
        )
    return base


def _int_from_text(name: str, text: pl.Expr, read_as: ReadAs) -> Coerced:
    plain = numbers.canonical_integer(text, read_as.separators)
    value = plain.cast(pl.Int64, strict=False)
    error = (
        pl.when(text.is_null())
        .then(pl.lit(None, pl.String))
        .when(plain.is_null())
        .then(_number_reason(name, text, "an integer", read_as))
        .when(value.is_null())
        .then(_value_reason(name, "is outside int64", text))
    )
    return Coerced(value, error)


def to_int(name: str, raw: pl.Expr, dtype: pl.DataType, read_as: ReadAs) -> Coerced:
    """int64 from integers, whole floats and integer text ('12', '12.0', declared grouping)."""
    if dtype.is_integer():
        value = raw.cast(pl.Int64, strict=False)
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, "is outside int64", raw)))
    if dtype.is_float():
        whole = raw.is_finite() & (raw == raw.floor()) & (raw.abs() < INT64_FLOAT_BOUND)
        value = pl.when(whole).then(raw.cast(pl.Int64, strict=False))
        rule = "is not a whole number within int64"
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, rule, raw)))
    if dtype == pl.String:
        return _int_from_text(name, _text(raw), read_as)
    if isinstance(dtype, pl.Decimal):
        # A typed decimal's text is plain 12.00, whatever the source's text spelling.
        return _int_from_text(name, _text(raw), ReadAs())
    return _type_error(name, raw, dtype, "an integer")


def to_int32(name: str, raw: pl.Expr, dtype: pl.DataType, read_as: ReadAs) -> Coerced:
    """int32: an int64 within the 32-bit range."""
    wide = to_int(name, raw, dtype, read_as)
    low, high = INT32_RANGE
    fits = wide.value.is_between(low, high)
    value = pl.when(fits).then(wide.value)
    error = (
        pl.when(wide.value.is_not_null() & ~fits)
        .then(_value_reason(name, "is outside int32", raw))
        .otherwise(wide.error)
    )
    return Coerced(value, error)


def to_decimal(
    name: str, raw: pl.Expr, dtype: pl.DataType, target: pa.Decimal128Type, read_as: ReadAs
) -> Coerced:
    """decimal(p, s) from integers, decimals and numbers/text with at most s decimals."""
    kind = polars_type(target)
    exact = isinstance(dtype, pl.Decimal) and (dtype.scale or 0) <= target.scale
    if dtype.is_integer() or exact:
        value = raw.cast(kind, strict=False)
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, f"does not fit {target}", raw)))
    if not (dtype == pl.String or dtype.is_float() or isinstance(dtype, pl.Decimal)):
        return _type_error(name, raw, dtype, "a decimal number")
    text = _text(raw)
    # Floats and wide decimals are judged by their text, so nothing is rounded on the way.
    plain = numbers.canonical_decimal(
        text, read_as.separators if dtype == pl.String else numbers.Separators()
    )
    rules = numbers.DecimalShape(target.precision, target.scale)
    extra = plain.str.contains(rules.extra_digits)
    fits = plain.str.contains(rules.fits)
    value = pl.when(plain.is_not_null() & ~extra & fits).then(
        plain.str.replace(rules.trim, "${1}").cast(kind, strict=False)  # Rust's group syntax
    )
    error = (
        pl.when(text.is_null())
        .then(pl.lit(None, pl.String))
        .when(plain.is_null())
        .then(_number_reason(name, text, "a decimal number", read_as))
        .when(extra)
        .then(
            _value_reason(
                name, f"has more than {target.scale} decimal places (never rounded)", text
            )
        )
        .when(value.is_null())
        .then(_value_reason(name, f"does not fit {target}", text))
    )
    return Coerced(value, error)


def to_float(name: str, raw: pl.Expr, dtype: pl.DataType, read_as: ReadAs) -> Coerced:
    """float64 from numbers and number text (declared separators, exponents allowed)."""
    if dtype.is_integer() or dtype.is_float() or isinstance(dtype, pl.Decimal):
        return Coerced(raw.cast(pl.Float64, strict=False), pl.lit(None, pl.String))
    if dtype != pl.String:
        return _type_error(name, raw, dtype, "a number")
    text = _text(raw)
    plain = numbers.canonical_float(text, read_as.separators)
    value = plain.cast(pl.Float64, strict=False)
    error = pl.when(text.is_not_null() & value.is_null()).then(
        _number_reason(name, text, "a number", read_as)
    )
    return Coerced(value, error)


def to_bool(name: str, raw: pl.Expr, dtype: pl.DataType) -> Coerced:
    """bool from booleans, 0/1 integers and true/false/yes/no/1/0 text (any case)."""
    if dtype == pl.Boolean:
        return Coerced(raw, pl.lit(None, pl.String))
    if dtype.is_integer():
        value = pl.when(raw == 1).then(pl.lit(True)).when(raw == 0).then(pl.lit(False))
        bad = raw.is_not_null() & value.is_null()
        return Coerced(value, pl.when(bad).then(_value_reason(name, "is not 0 or 1", raw)))
    if dtype != pl.String:
        return _type_error(name, raw, dtype, "a boolean")
    text = _text(raw).str.to_lowercase()
    value = (
        pl.when(text.is_in(BOOL_TRUE))
        .then(pl.lit(True))
        .when(text.is_in(BOOL_FALSE))
        .then(pl.lit(False))
    )
    choices = "/".join((*BOOL_TRUE, *BOOL_FALSE))
    error = pl.when(text.is_not_null() & value.is_null()).then(
        _value_reason(name, f"is not a boolean ({choices})", _text(raw))
    )
    return Coerced(value, error)


def to_date(name: str, raw: pl.Expr, dtype: pl.DataType, read_as: ReadAs) -> Coerced:
    """date32 from dates and YYYY-MM-DD text (or text in the column's declared format)."""
    if dtype == pl.Date:
        return Coerced(raw, pl.lit(None, pl.String))
    if dtype != pl.String:
        return _type_error(name, raw, dtype, "a date (YYYY-MM-DD)")
    text = _text(raw)
    if read_as.format is not None:
        value = text.str.to_date(read_as.format, strict=False)
        error = pl.when(text.is_not_null() & value.is_null()).then(
            _value_reason(name, f"is not a date in the form {read_as.format}", text)
        )
        return Coerced(value, error)
    shaped = text.str.contains(DATE_PATTERN)
    value = pl.when(shaped).then(text.str.to_date(_DATE_FORMAT, strict=False))
    error = (
        pl.when(text.is_null())
        .then(pl.lit(None, pl.String))
        .when(~shaped)
        .then(_value_reason(name, "is not a date in the form YYYY-MM-DD", text))
        .when(value.is_null())
        .then(_value_reason(name, "is not a valid calendar date", text))
    )
    return Coerced(value, error)


def _local_to_utc(naive: pl.Expr, timezone: str) -> pl.Expr:
    """Wall-clock times in ``timezone`` as UTC instants.

    A time that falls in a daylight-saving gap does not exist there and becomes null (the
    row is quarantined); a time that occurs twice takes its first (earlier) instant.
    """
    if timezone == "UTC":
        return naive.dt.replace_time_zone("UTC")
    return naive.dt.replace_time_zone(
        timezone, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def _offset(text: pl.Expr) -> pl.Expr:
    """An offset as ``+hh:mm`` from ``Z``, ``+hh:mm``, ``+hhmm`` or ``+hh``."""
    upper = text.str.to_uppercase()
    return (
        pl.when(upper == "Z")
        .then(pl.lit("+00:00"))
        .when(text.str.len_chars() == 3)
        .then(text + pl.lit(":00"))
        .when(text.str.len_chars() == 5)
        .then(pl.concat_str([text.str.slice(0, 3), pl.lit(":"), text.str.slice(3, 2)]))
        .otherwise(text)
    )


def _epoch_timestamp(name: str, raw: pl.Expr, dtype: pl.DataType, unit: EpochUnit) -> Coerced:
    """UTC timestamps from epoch seconds or milliseconds (integers, or exact decimal text)."""
    target = pl.Datetime("us", "UTC")
    if isinstance(dtype, pl.Datetime):
        return to_timestamp(name, raw, dtype, ReadAs())
    scale = numbers.EPOCH_MICROS[unit]
    if dtype.is_integer() or dtype.is_float():
        low, high = (bound // scale for bound in numbers.MICROS_RANGE)
        fits = raw.is_between(low, high)  # checked before multiplying: no overflow
        if dtype.is_float():
            fits = fits & raw.is_finite() & (raw == raw.floor())
        micros = pl.when(fits).then(raw.cast(pl.Int64, strict=False) * scale)
        text = raw.cast(pl.String)
    elif dtype == pl.String:
        text = _text(raw)
        micros = numbers.epoch_micros(text, unit)
    else:
        return _type_error(name, raw, dtype, f"epoch {unit} (a number)")
    in_range = micros.is_between(*numbers.MICROS_RANGE)
    value = pl.when(in_range).then(micros.cast(pl.Datetime("us")).dt.replace_time_zone("UTC"))
    rule = numbers.epoch_rule(unit)
    error = pl.when(raw.is_not_null() & value.is_null()).then(_value_reason(name, rule, text))
    return Coerced(value.cast(target), error)


def to_timestamp(name: str, raw: pl.Expr, dtype: pl.DataType, read_as: ReadAs) -> Coerced:
    """timestamp[us, UTC] from timestamps and ISO-8601 text (naive = the source's zone)."""
    if read_as.epoch is not None:
        return _epoch_timestamp(name, raw, dtype, read_as.epoch)
    target = pl.Datetime("us", "UTC")
    if isinstance(dtype, pl.Datetime):
        utc = (
            _local_to_utc(raw, read_as.timezone)
            if dtype.time_zone is None
            else (raw.dt.convert_time_zone("UTC"))
        )
        gap = raw.is_not_null() & utc.is_null()
        zone_reason = _value_reason(
            name, f"does not exist in {read_as.timezone} (a daylight-saving gap)", raw
        )
        if dtype.time_unit != "ns":
            return Coerced(utc.cast(target), pl.when(gap).then(zone_reason))
        sub_micro = raw.dt.nanosecond() % 1000 != 0
        value = pl.when(~sub_micro).then(utc.cast(target))
        rule = "has sub-microsecond precision (it would be truncated)"
        return Coerced(
            value,
            pl.when(sub_micro).then(_value_reason(name, rule, raw)).when(gap).then(zone_reason),
        )
    if dtype != pl.String:
        return _type_error(name, raw, dtype, f"an ISO-8601 timestamp {TIMESTAMP_FORMS}")
    text = _text(raw)
    if read_as.format is not None:
        return _formatted_timestamp(name, text, read_as)
    parts = text.str.extract_groups(TIMESTAMP_PATTERN)
    day, clock, fraction, offset = (parts.struct.field(str(i)) for i in range(1, 5))
    sub_micro = fraction.str.slice(6).str.contains(numbers.NONZERO_DIGIT)
    canonical = pl.concat_str(
        [day, pl.lit("T"), clock, pl.lit("."), (fraction.fill_null("") + "000000").str.slice(0, 6)]
    )
    if read_as.timezone == "UTC":
        # Naive means UTC: one parse, the missing offset read as +00:00.
        naive = local = None
        parsed = pl.concat_str([canonical, _offset(offset.fill_null("Z"))]).str.to_datetime(
            _ZONED_FORMAT, time_unit="us", time_zone="UTC", strict=False
        )
    else:
        zoned = pl.concat_str([canonical, _offset(offset)]).str.to_datetime(
            _ZONED_FORMAT, time_unit="us", time_zone="UTC", strict=False
        )
        naive = canonical.str.to_datetime(_NAIVE_FORMAT, time_unit="us", strict=False)
        local = _local_to_utc(naive, read_as.timezone)
        parsed = pl.when(offset.is_null()).then(local).otherwise(zoned)
    value = pl.when(day.is_not_null() & ~sub_micro.fill_null(False)).then(parsed)
    error = (
        pl.when(text.is_null())
        .then(pl.lit(None, pl.String))
        .when(day.is_null())
        .then(_value_reason(name, f"is not an ISO-8601 timestamp {TIMESTAMP_FORMS}", text))
        .when(sub_micro)
        .then(_value_reason(name, "has sub-microsecond precision", text))
    )
    if naive is not None and local is not None:
        error = error.when(offset.is_null() & naive.is_not_null() & local.is_null()).then(
            _value_reason(
                name, f"does not exist in {read_as.timezone} (a daylight-saving gap)", text
            )
        )
    error = error.when(value.is_null()).then(
        _value_reason(name, "is not a valid date and time", text)
    )
    return Coerced(value.cast(target), error)


def _formatted_timestamp(name: str, text: pl.Expr, read_as: ReadAs) -> Coerced:
    """timestamp[us, UTC] from text in the column's strftime format; without an offset
    (``%z``) it is a wall-clock time in the source's zone."""
    fmt = read_as.format
    assert fmt is not None
    target = pl.Datetime("us", "UTC")
    form = _value_reason(name, f"is not a date and time in the form {fmt}", text)
    if "%z" in fmt or "%:z" in fmt:
        value = text.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False)
        return Coerced(value.cast(target), pl.when(text.is_not_null() & value.is_null()).then(form))
    naive = text.str.to_datetime(fmt, time_unit="us", strict=False)
    local = _local_to_utc(naive, read_as.timezone)
    gap = _value_reason(name, f"does not exist in {read_as.timezone} (a daylight-saving gap)", text)
    error = (
        pl.when(text.is_not_null() & naive.is_null())
        .then(form)
        .when(naive.is_not_null() & local.is_null())
        .then(gap)
    )
    return Coerced(local.cast(target), error)


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
        value = pl.when(raw.is_not_null()).then(raw.struct.json_encode())
    elif isinstance(dtype, pl.List | pl.Array):
        # JSON of a one-field struct, unwrapped: {"v":[1,2]} -> [1,2].
        wrapped = pl.struct(raw.alias("v")).struct.json_encode()
        value = pl.when(raw.is_not_null()).then(wrapped.str.slice(5).str.strip_suffix("}"))
    else:
        value = raw.cast(pl.String, strict=False)
    bad = raw.is_not_null() & value.is_null()
    reason = pl.lit(f"{name}: {type_name(dtype)} value cannot be read as UTF-8 text")
    return Coerced(value, pl.when(bad).then(reason))


def _typed(
    name: str, raw: pl.Expr, target: pa.DataType, dtype: pl.DataType, read_as: ReadAs
) -> Coerced:
    if pa.types.is_int64(target):
        return to_int(name, raw, dtype, read_as)
    if pa.types.is_int32(target):
        return to_int32(name, raw, dtype, read_as)
    if pa.types.is_decimal128(target):
        return to_decimal(name, raw, dtype, target, read_as)
    if pa.types.is_float64(target):
        return to_float(name, raw, dtype, read_as)
    if pa.types.is_boolean(target):
        return to_bool(name, raw, dtype)
    if pa.types.is_date32(target):
        return to_date(name, raw, dtype, read_as)
    if pa.types.is_timestamp(target):
        return to_timestamp(name, raw, dtype, read_as)
    if pa.types.is_string(target):
        return to_string(name, raw, dtype)
    raise TypeError(f"contract type {target} of column {name} has no coercion")


def coerce(
    name: str,
    target: pa.DataType,
    dtype: pl.DataType,
    read_as: ReadAs | None = None,
    raw: pl.Expr | None = None,
) -> Coerced:
    """The contract-typed value of raw column ``name`` (polars type ``dtype``) and its errors.

    ``raw`` is the column's raw values when they are not ``pl.col(name)`` as it is (null
    spellings already made null).
    """
    read_as = read_as or ReadAs()
    raw = pl.col(name) if raw is None else raw
    kind = polars_type(target)
    if dtype == pl.Null:
        return Coerced(pl.lit(None, kind), pl.lit(None, pl.String), pl.lit(False))
    result = _typed(name, raw, target, dtype, read_as)
    if dtype != pl.String:
        return Coerced(result.value.cast(kind), result.error, raw.is_not_null())
    present = raw.is_not_null() if pa.types.is_string(target) else _text(raw).is_not_null()
    limit = read_as.max_bytes
    too_big = raw.str.len_bytes() > limit
    bound = pl.format(
        f"{name}: value is {{}} bytes, over the {limit}-byte bound for one field",
        raw.str.len_bytes(),
    )
    return Coerced(
        pl.when(too_big).then(pl.lit(None, kind)).otherwise(result.value.cast(kind)),
        pl.when(too_big).then(bound).otherwise(result.error),
        present,
    )
