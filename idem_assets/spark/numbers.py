"""Number columns in Spark expressions: int64, int32, decimal(P,S), float64.

Each function mirrors its namesake in ``idem_assets.landing.coerce`` and judges text with
the patterns of ``idem_assets.landing.numbers`` (shared regex strings, Java syntax). A
reason refers to the typed value through ``typed``, the value column computed in an
earlier projection, instead of repeating its expression.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing import numbers
from idem_assets.landing.coerce import INT32_RANGE, INT64_FLOAT_BOUND, ReadAs
from idem_assets.spark.values import (
    Raw,
    Typed,
    float_text,
    no_error,
    raw_text,
    type_error,
    value_reason,
    value_reasons,
)

_NUMBER_KINDS = ("integer", "float", "decimal")


def plain(text: Column, seps: numbers.Separators) -> Column:
    """Text without thousands separators and with ``.`` as the decimal separator."""
    out = text
    if seps.thousands is not None:
        out = F.replace(out, F.lit(seps.thousands), F.lit(""))
    if seps.decimal != ".":
        out = F.replace(out, F.lit(seps.decimal), F.lit("."))
    return out


def canonical_integer(text: Column, seps: numbers.Separators) -> Column:
    """``[+-]digits`` of integer text in the declared spelling; null if it is not one."""
    return F.when(
        text.rlike(seps.integer_pattern()),
        F.regexp_replace(plain(text, seps), numbers.ZERO_FRACTION, ""),
    )


def canonical_decimal(text: Column, seps: numbers.Separators) -> Column:
    """``[+-]digits[.digits]`` of decimal text in the declared spelling; null if not one."""
    return F.when(text.rlike(seps.decimal_pattern()), plain(text, seps))


def canonical_float(text: Column, seps: numbers.Separators) -> Column:
    """Float text with a ``.`` decimal point; null if it is not a number's text."""
    return F.when(text.rlike(seps.float_pattern()), plain(text, seps))


def number_rule(text: Column, kind: str, read_as: ReadAs) -> Column:
    """'is not a number' with the declared separators and, where it helps, the setting to use."""
    base = f"is not {kind} like {read_as.separators.example(kind)}"
    if read_as.separators.is_default:
        return F.when(text.contains(","), F.lit(base + numbers.SEPARATOR_HINT)).otherwise(
            F.lit(base)
        )
    return F.lit(base)


def _spelled(
    raw: Raw, canonical: Callable[[Column, numbers.Separators], Column], seps: numbers.Separators
) -> Column:
    """``canonical`` of the raw text in the declared spelling (JSON numbers: their own)."""
    text = _text(raw)
    if raw.json_number is None or seps.is_default:
        return canonical(text, seps)
    return F.when(raw.json_number, canonical(text, numbers.Separators())).otherwise(
        canonical(text, seps)
    )


def _text(raw: Raw) -> Column:
    """The text a number kind is judged by (stripped text of strings, Polars' spelling else)."""
    if raw.text is not None:
        return raw.text
    return float_text(raw.value) if raw.kind == "float" else raw.value.cast("string")


def _int_from_text(
    name: str, raw: Raw, typed: Column, seps: numbers.Separators, read_as: ReadAs
) -> Typed:
    text = _text(raw)
    canonical = raw.stage("int", _spelled(raw, canonical_integer, seps))
    error = value_reasons(
        name,
        text,
        [
            (canonical.isNull(), number_rule(text, "an integer", read_as)),
            (typed.isNull(), "is outside int64"),
        ],
    )
    return Typed(canonical.try_cast("bigint"), error)


def to_int(name: str, raw: Raw, typed: Column, read_as: ReadAs) -> Typed:
    """int64 from integers, whole floats and integer text ('12', '12.0', declared grouping)."""
    value = raw.value
    if raw.kind == "integer":
        return Typed(
            value.try_cast("bigint"),
            F.when(
                value.isNotNull() & typed.isNull(),
                value_reason(name, "is outside int64", raw_text(raw)),
            ),
        )
    if raw.kind == "float":
        whole = (F.abs(value) < INT64_FLOAT_BOUND) & (value % 1.0 == 0)
        rule = "is not a whole number within int64"
        return Typed(
            F.when(whole, value.try_cast("bigint")),
            F.when(value.isNotNull() & typed.isNull(), value_reason(name, rule, raw_text(raw))),
        )
    if raw.kind in ("string", "decimal"):
        # Decimal values have no separators: their text is plain, whatever the source declares.
        seps = read_as.separators if raw.kind == "string" else numbers.Separators()
        return _int_from_text(name, raw, typed, seps, read_as)
    return type_error(name, raw, pa.int64())


def to_int32(name: str, raw: Raw, typed: Column, read_as: ReadAs) -> Typed:
    """int32: an int64 within the 32-bit range."""
    low, high = INT32_RANGE
    wide = to_int(name, raw, F.lit(None), read_as).value
    fits = wide.between(low, high)
    error = F.when(
        wide.isNotNull() & typed.isNull(), value_reason(name, "is outside int32", raw_text(raw))
    ).otherwise(to_int(name, raw, wide, read_as).error)
    return Typed(F.when(fits, wide), error)


def to_decimal(
    name: str, raw: Raw, typed: Column, target: pa.Decimal128Type, read_as: ReadAs
) -> Typed:
    """decimal(p, s) from integers, decimals and numbers/text with at most s decimals."""
    kind = f"decimal({target.precision},{target.scale})"
    exact = raw.kind == "decimal" and (raw.scale or 0) <= target.scale
    if raw.kind == "integer" or exact:
        return Typed(
            raw.value.try_cast(kind),
            F.when(
                raw.value.isNotNull() & typed.isNull(),
                value_reason(name, f"does not fit {target}", raw_text(raw)),
            ),
        )
    if raw.kind not in ("string", "float", "decimal"):
        return type_error(name, raw, target)
    text = _text(raw)
    # Floats and wide decimals are judged by their text, so nothing is rounded on the way.
    seps = read_as.separators if raw.kind == "string" else numbers.Separators()
    canonical = raw.stage("decimal", _spelled(raw, canonical_decimal, seps))
    shape = numbers.DecimalShape(target.precision, target.scale)
    extra = raw.stage("extra_digits", canonical.rlike(shape.extra_digits), level=1)
    fits = raw.stage("fits", canonical.rlike(shape.fits), level=1)
    value = F.when(
        canonical.isNotNull() & ~extra & fits,
        F.regexp_replace(canonical, shape.trim, "$1").try_cast(kind),
    )  # Java's syntax
    error = value_reasons(
        name,
        text,
        [
            (canonical.isNull(), number_rule(text, "a decimal number", read_as)),
            (extra, f"has more than {target.scale} decimal places (never rounded)"),
            (typed.isNull(), f"does not fit {target}"),
        ],
    )
    return Typed(value, error)


def to_float(name: str, raw: Raw, typed: Column, read_as: ReadAs) -> Typed:
    """float64 from numbers and number text (declared separators, exponents allowed)."""
    if raw.kind in _NUMBER_KINDS:
        return Typed(raw.value.cast("double"), no_error())
    if raw.kind != "string":
        return type_error(name, raw, pa.float64())
    text = _text(raw)
    value = raw.stage("float", _spelled(raw, canonical_float, read_as.separators)).try_cast(
        "double"
    )
    return Typed(
        value, value_reasons(name, text, [(typed.isNull(), number_rule(text, "a number", read_as))])
    )
