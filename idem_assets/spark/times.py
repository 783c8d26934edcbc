"""Date and timestamp columns in Spark expressions: ISO text, time zones, epoch numbers.

Each function mirrors its namesake in ``idem_assets.landing.coerce`` with the same
patterns, imported from there (``DATE_PATTERN``, ``TIMESTAMP_PATTERN``,
``numbers.EPOCH_TEXT``, ``numbers.NONZERO_DIGIT``). The session time zone is UTC (checked
by the reader), so a wall-clock time parsed or cast to TIMESTAMP is read as UTC first and
then moved from the source's declared zone.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing import numbers
from idem_assets.landing.coerce import (
    DATE_PATTERN,
    TIMESTAMP_FORMS,
    TIMESTAMP_PATTERN,
    EpochUnit,
    ReadAs,
)
from idem_assets.spark.values import (
    Raw,
    Typed,
    no_error,
    raw_text,
    type_error,
    value_reason,
    value_reasons,
)

# Java DateTimeFormatter syntax: the forms idem_assets.landing.coerce spells for chrono
# (strftime), which shares no syntax with it.
_DATE_FORMAT = "yyyy-MM-dd"
_ZONED_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
_NAIVE_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"


def to_date(name: str, raw: Raw, typed: Column) -> Typed:
    """date from dates and YYYY-MM-DD text."""
    if raw.kind == "date":
        return Typed(raw.value, no_error())
    if raw.kind != "string":
        return type_error(name, raw, pa.date32())
    assert raw.text is not None
    text = raw.text
    shaped = raw.stage("date_shaped", text.rlike(DATE_PATTERN))
    error = value_reasons(
        name,
        text,
        [
            (~shaped, "is not a date in the form YYYY-MM-DD"),
            (typed.isNull(), "is not a valid calendar date"),
        ],
    )
    return Typed(F.when(shaped, F.try_to_date(text, _DATE_FORMAT)), error)


def local_to_utc(wall: Column, timezone: str) -> Column:
    """Wall-clock times in ``timezone`` (given as UTC timestamps) as UTC instants.

    A time in a daylight-saving gap does not exist there and becomes null; a time that
    occurs twice takes its earlier instant (as ``java.time`` resolves it).
    """
    if timezone == "UTC":
        return wall
    instant = F.to_utc_timestamp(wall, timezone)
    # A gap time is moved forward by java.time; moved back, it is not the same wall clock.
    return F.when(F.from_utc_timestamp(instant, timezone) == wall, instant)


def _gap_rule(timezone: str) -> str:
    return f"does not exist in {timezone} (a daylight-saving gap)"


def _from_timestamp(name: str, raw: Raw, typed: Column, timezone: str) -> Typed:
    if raw.zoned:
        return Typed(raw.value, no_error())
    # Spark reads naive Parquet timestamps as TIMESTAMP_NTZ; as TIMESTAMP they are UTC.
    value = local_to_utc(raw.value.cast("timestamp"), timezone)
    return Typed(
        value,
        F.when(
            raw.value.isNotNull() & typed.isNull(),
            value_reason(name, _gap_rule(timezone), raw_text(raw)),
        ),
    )


def _offset(text: Column) -> Column:
    """An offset as ``+hh:mm`` from ``Z``, ``+hh:mm``, ``+hhmm`` or ``+hh``."""
    return (
        F.when(F.upper(text) == "Z", F.lit("+00:00"))
        .when(F.length(text) == 3, F.concat(text, F.lit(":00")))
        .when(
            F.length(text) == 5,
            F.concat(F.substring(text, 1, 3), F.lit(":"), F.substring(text, 4, 2)),
        )
        .otherwise(text)
    )


def _from_text(name: str, raw: Raw, typed: Column, timezone: str) -> Typed:
    assert raw.text is not None
    text = raw.text
    # regexp_extract gives "" for a group that did not take part (Polars: null).
    day, clock, fraction, offset = (
        raw.stage(part, F.regexp_extract(text, TIMESTAMP_PATTERN, i))
        for i, part in enumerate(("day", "clock", "fraction", "offset"), start=1)
    )
    shaped = raw.stage("shaped", text.rlike(TIMESTAMP_PATTERN))
    sub_micro = raw.stage(
        "sub_micro", F.substring(fraction, 7, 3).rlike(numbers.NONZERO_DIGIT), level=1
    )
    micros = F.substring(F.concat(fraction, F.lit("000000")), 1, 6)
    canonical = F.concat(day, F.lit("T"), clock, F.lit("."), micros)
    rules = [
        (~shaped, f"is not an ISO-8601 timestamp {TIMESTAMP_FORMS}"),
        (sub_micro, "has sub-microsecond precision"),
    ]
    if timezone == "UTC":
        # Naive means UTC: one parse, the missing offset read as +00:00.
        parsed = F.try_to_timestamp(
            F.concat(canonical, _offset(F.when(offset == "", F.lit("Z")).otherwise(offset))),
            F.lit(_ZONED_FORMAT),
        )
    else:
        zoned = raw.stage(
            "zoned",
            F.try_to_timestamp(F.concat(canonical, _offset(offset)), F.lit(_ZONED_FORMAT)),
            level=1,
        )
        naive = raw.stage("naive", F.try_to_timestamp(canonical, F.lit(_NAIVE_FORMAT)), level=1)
        parsed = F.when(offset == "", local_to_utc(naive, timezone)).otherwise(zoned)
        rules.append(((offset == "") & naive.isNotNull() & typed.isNull(), _gap_rule(timezone)))
    rules.append((typed.isNull(), "is not a valid date and time"))
    return Typed(F.when(shaped & ~sub_micro, parsed), value_reasons(name, text, rules))


def epoch_micros(raw: Raw, unit: EpochUnit) -> Column:
    """Microseconds since the epoch from epoch text (exact, no float on the way); else null."""
    assert raw.text is not None
    sign, whole, fraction = (
        raw.stage(f"epoch_{i}", F.regexp_extract(raw.text, numbers.EPOCH_TEXT, i))
        for i in (1, 2, 3)
    )
    matched = raw.stage("epoch_matched", raw.text.rlike(numbers.EPOCH_TEXT))
    digits = numbers.EPOCH_FRACTION_DIGITS[unit]
    scale = numbers.EPOCH_MICROS[unit]
    exact = ~F.substring(fraction, digits + 1, 1 << 20).rlike(numbers.NONZERO_DIGIT)
    fraction_value = F.substring(F.concat(fraction, F.lit("0" * digits)), 1, digits)
    low, high = (bound // scale for bound in numbers.MICROS_RANGE)
    whole_value = whole.try_cast("bigint")
    size = F.try_add(F.try_multiply(whole_value, F.lit(scale)), fraction_value.cast("bigint"))
    signed = F.when(sign == "-", -size).otherwise(size)
    return F.when(matched & exact & whole_value.between(0, max(-low, high)), signed)


def _epoch(name: str, raw: Raw, typed: Column, unit: EpochUnit) -> Typed:
    """UTC timestamps from epoch seconds or milliseconds (integers, or exact decimal text)."""
    if raw.kind == "timestamp":
        return _from_timestamp(name, raw, typed, "UTC")
    scale = numbers.EPOCH_MICROS[unit]
    if raw.kind in ("integer", "float"):
        low, high = (bound // scale for bound in numbers.MICROS_RANGE)
        value = raw.value
        fits = value.between(low, high)  # checked before multiplying: no overflow
        if raw.kind == "float":
            fits = fits & (value % 1.0 == 0)
        micros = F.when(fits, F.try_multiply(value.try_cast("bigint"), F.lit(scale)))
        text = raw_text(raw)
    elif raw.kind == "string":
        assert raw.text is not None
        text = raw.text
        micros = raw.stage("epoch_micros", epoch_micros(raw, unit), level=1)
    else:
        return type_error(name, raw, pa.timestamp("us", "UTC"), unit)
    in_range = micros.between(*numbers.MICROS_RANGE)
    error = F.when(
        text.isNotNull() & typed.isNull(), value_reason(name, numbers.epoch_rule(unit), text)
    )
    return Typed(F.when(in_range, F.timestamp_micros(micros)), error)


def to_timestamp(name: str, raw: Raw, typed: Column, read_as: ReadAs) -> Typed:
    """UTC timestamp from timestamps and ISO-8601 text (naive = the source's zone)."""
    if read_as.epoch is not None:
        return _epoch(name, raw, typed, read_as.epoch)
    if raw.kind == "timestamp":
        return _from_timestamp(name, raw, typed, read_as.timezone)
    if raw.kind != "string":
        return type_error(name, raw, pa.timestamp("us", "UTC"))
    return _from_text(name, raw, typed, read_as.timezone)
