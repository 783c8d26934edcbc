"""One raw landing column to its contract type, in Spark expressions (see docs/spark.md).

The same rules as ``idem_assets.landing.coerce``, expression for expression: each
coercion yields the typed value and, per row, either null or the local reader's reason.
Failed parses use ``try_*`` functions, so ANSI mode never aborts a read over a bad value:
the row is quarantined instead.

Values and reasons are computed in separate projections: a reason refers to the typed
value (``typed``, a column of the previous projection) instead of repeating its
expression, and is only evaluated for rows whose value is null.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.lake.frames import is_text
from idem_assets.landing.coerce import BOOL_FALSE, BOOL_TRUE, ReadAs
from idem_assets.spark.numbers import to_decimal, to_float, to_int, to_int32
from idem_assets.spark.schema import spark_type
from idem_assets.spark.times import to_date, to_timestamp
from idem_assets.spark.values import (
    Raw,
    Typed,
    float_text,
    no_error,
    non_blank,
    raw_text,
    stripped,
    timestamp_text,
    type_error,
    value_reason,
)

_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_WORDS = (
    (pa.types.is_integer, "integer"),
    (pa.types.is_floating, "float"),
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_date, "date"),
    (pa.types.is_struct, "object"),
    (pa.types.is_list, "list"),
    (pa.types.is_large_list, "list"),
    (pa.types.is_null, "null"),
    (pa.types.is_binary, "binary"),
    (pa.types.is_large_binary, "binary"),
    (pa.types.is_time, "time of day"),
    (pa.types.is_duration, "duration"),
)


def raw_of_arrow(value: Column, kind: pa.DataType, text: Column | None = None) -> Raw:
    """A Parquet column's raw values, with the kind its Arrow type has for the local reader."""
    if pa.types.is_dictionary(kind):
        return raw_of_arrow(value, kind.value_type, text)
    if pa.types.is_timestamp(kind):
        return Raw(
            value, "timestamp", zoned=kind.tz is not None, fraction_digits=_DIGITS[kind.unit]
        )
    if pa.types.is_decimal128(kind):
        return Raw(value, "decimal", scale=kind.scale)
    word = next((w for check, w in _WORDS if check(kind)), None)
    if word is not None:
        return Raw(value, word)
    # Strings, and the exotic types the local reader judges by their text form.
    return Raw(value if is_text(kind) else value.cast("string"), "string", text)


def to_string(name: str, raw: Raw, typed: Column) -> Typed:
    """UTF-8 text from text, bytes, scalars (their text) and structs/lists (their JSON)."""
    value = raw.value
    if raw.kind == "string":
        return Typed(value, no_error())
    if raw.kind == "binary":
        reason = F.lit(f"{name}: binary value cannot be read as UTF-8 text")
        return Typed(
            F.try_validate_utf8(value.cast("string")),
            F.when(value.isNotNull() & typed.isNull(), reason),
        )
    if raw.kind in ("object", "list"):
        return Typed(F.to_json(value), no_error())
    if raw.kind == "float":
        return Typed(float_text(value), no_error())
    if raw.kind == "timestamp":
        return Typed(timestamp_text(value, raw.zoned, raw.fraction_digits), no_error())
    return Typed(value.cast("string"), no_error())


def to_bool(name: str, raw: Raw, typed: Column) -> Typed:
    """bool from booleans, 0/1 integers and true/false/yes/no/1/0 text (any case)."""
    value = raw.value
    if raw.kind == "boolean":
        return Typed(value, no_error())
    if raw.kind == "integer":
        return Typed(
            F.when(value == 1, F.lit(True)).when(value == 0, F.lit(False)),
            F.when(
                value.isNotNull() & typed.isNull(),
                value_reason(name, "is not 0 or 1", raw_text(raw)),
            ),
        )
    if raw.kind != "string":
        return type_error(name, raw, pa.bool_())
    assert raw.text is not None
    lower = F.lower(raw.text)
    choices = "/".join((*BOOL_TRUE, *BOOL_FALSE))
    return Typed(
        F.when(lower.isin(list(BOOL_TRUE)), F.lit(True)).when(
            lower.isin(list(BOOL_FALSE)), F.lit(False)
        ),
        F.when(
            raw.text.isNotNull() & typed.isNull(),
            value_reason(name, f"is not a boolean ({choices})", raw.text),
        ),
    )


def _typed(name: str, raw: Raw, target: pa.DataType, typed: Column, read_as: ReadAs) -> Typed:
    if raw.kind == "binary" and not pa.types.is_string(target):
        # Text stored as bytes is read as text when it is valid UTF-8, as the local reader does.
        decoded = F.try_validate_utf8(raw.value.cast("string"))
        as_text = _by_target(
            name, Raw(decoded, "string", non_blank(stripped(decoded))), target, typed, read_as
        )
        refused = _by_target(name, raw, target, typed, read_as)  # a type error
        return Typed(
            as_text.value, F.when(decoded.isNull(), refused.error).otherwise(as_text.error)
        )
    return _by_target(name, raw, target, typed, read_as)


def _by_target(name: str, raw: Raw, target: pa.DataType, typed: Column, read_as: ReadAs) -> Typed:
    if pa.types.is_int64(target):
        return to_int(name, raw, typed, read_as)
    if pa.types.is_int32(target):
        return to_int32(name, raw, typed, read_as)
    if pa.types.is_decimal128(target):
        return to_decimal(name, raw, typed, target, read_as)
    if pa.types.is_float64(target):
        return to_float(name, raw, typed, read_as)
    if pa.types.is_boolean(target):
        return to_bool(name, raw, typed)
    if pa.types.is_date32(target):
        return to_date(name, raw, typed)
    if pa.types.is_timestamp(target):
        return to_timestamp(name, raw, typed, read_as)
    if pa.types.is_string(target):
        return to_string(name, raw, typed)
    raise TypeError(f"contract type {target} of column {name} has no Spark coercion")


def coerce(name: str, raw: Raw, target: pa.DataType, typed: Column, read_as: ReadAs) -> Typed:
    """The contract-typed value of a raw column and its reason (null when fine).

    The value refers to ``raw`` only; the reason also to ``typed`` (the value's column),
    so it must be evaluated in a projection after the one that computes the value.
    """
    kind = spark_type(target)
    if raw.kind == "null":
        return Typed(F.lit(None).cast(kind), no_error(), F.lit(False))
    result = _typed(name, raw, target, typed, read_as)
    value, error = result.value.cast(kind), F.when(typed.isNull(), result.error.cast("string"))
    if raw.kind != "string":
        return Typed(value, error, raw.value.isNotNull())
    # Blank text headed for a non-string type is no value at all (not a bad one).
    present = raw.value.isNotNull() if raw.text is None else raw.text.isNotNull()
    limit = read_as.max_bytes
    size = F.octet_length(raw.value)
    bound = F.concat(
        F.lit(f"{name}: value is "),
        size.cast("string"),
        F.lit(f" bytes, over the {limit}-byte bound for one field"),
    )
    return Typed(
        F.when(size > limit, F.lit(None).cast(kind)).otherwise(value),
        F.when(size > limit, bound).otherwise(error),
        present,
    )
