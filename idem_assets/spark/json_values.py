"""JSON values of any kind to contract types, as the local reader types each JSON kind.

A JSON Lines file is parsed into VARIANT values, which keep the kind the file wrote
(string, integer, fractional number, boolean, object, array): the kinds Polars infers for
a consistently written key. Strings are read in the source's declared spelling
(separators, time zone); numbers in JSON's own spelling, as numbers.

Where the local reader's outcome for a kind equals reading the value's text (an integer
headed for an int64, a number headed for a decimal), the value goes through the text
coercion, with the default separators for numbers; the other kinds take their own cheap
coercion (a type error, a 0/1 boolean, a float's whole-number check). One text path per
column keeps the generated code small.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing.coerce import ReadAs
from idem_assets.spark.coerce import coerce
from idem_assets.spark.values import Raw, Stages, Typed, expected_form, with_article

_INTEGERS = ("BIGINT", "INT", "SMALLINT", "TINYINT")
KINDS = ("string", "integer", "float", "boolean", "object", "list")


def json_schema(value: Column) -> Column:
    """The Spark type name of a JSON value (a VARIANT): STRING, BIGINT, DECIMAL(3,1)..."""
    return F.schema_of_variant(value)


def json_kind(schema: Column) -> Column:
    """The kind of a JSON value, as the local reader names its type, from its ``json_schema``
    (null for a null value)."""
    return (
        F.when(schema == "STRING", F.lit("string"))
        .when(schema.isin(*_INTEGERS) | schema.rlike(r"^DECIMAL\(\d+,0\)$"), F.lit("integer"))
        .when(schema.startswith("DECIMAL") | schema.isin("DOUBLE", "FLOAT"), F.lit("float"))
        .when(schema == "BOOLEAN", F.lit("boolean"))
        .when(schema.startswith("OBJECT"), F.lit("object"))
        .when(schema.startswith("ARRAY"), F.lit("list"))
    )


def json_text(value: Column) -> Column:
    """A JSON value's text: strings as they are, numbers' digits, objects and arrays as JSON."""
    return F.try_variant_get(value, "$", "string")


def text_kinds(target: pa.DataType, read_as: ReadAs) -> tuple[str, ...]:
    """The JSON kinds judged by their text for a target: the local reader's outcome for them
    is the outcome for their text (numbers in JSON's spelling)."""
    if pa.types.is_string(target):
        return KINDS
    if pa.types.is_decimal(target) or pa.types.is_floating(target):
        return ("string", "integer", "float")
    if pa.types.is_integer(target) or (pa.types.is_timestamp(target) and read_as.epoch):
        return ("string", "integer")
    return ("string",)


def _own_kinds(target: pa.DataType, read_as: ReadAs) -> tuple[str, ...]:
    """Kinds with a coercion of their own for a target (the rest of the non-text kinds are
    refused with a type error): floats' whole-number check, booleans, 0/1 integers."""
    if pa.types.is_boolean(target):
        return ("integer", "boolean")
    if pa.types.is_integer(target) or (pa.types.is_timestamp(target) and read_as.epoch):
        return ("float",)
    return ()


def _own_value(value: Column, kind: str) -> Column:
    """A JSON value of ``kind`` as the Spark value the local reader's Polars type holds."""
    types = {"integer": "decimal(38,0)", "float": "double", "boolean": "boolean"}
    return F.try_variant_get(value, "$", types[kind])


def json_typed(
    name: str,
    value: Column,
    kind: Column,
    text: Column,
    stripped: Column | None,
    target: pa.DataType,
    typed: Column,
    read_as: ReadAs,
    stages: Stages,
) -> Typed:
    """The contract-typed value of a JSON value and its reason, by the value's kind.

    ``kind`` and ``text`` are ``json_kind`` and ``json_text`` of ``value``; ``stripped`` is
    the stripped, non-blank text of the kinds judged by their text (for non-string targets).
    """
    judged_by_text = text_kinds(target, read_as)
    number = kind.isin("integer", "float") if len(judged_by_text) > 1 else None
    by_text = coerce(
        name,
        Raw(text, "string", stripped, stages=stages, json_number=number),
        target,
        typed,
        read_as,
    )
    if pa.types.is_string(target):
        return by_text
    value_of, error_of, present = by_text.value, by_text.error, by_text.present
    for word in _own_kinds(target, read_as):
        own = coerce(name, Raw(_own_value(value, word), word, text), target, typed, read_as)
        value_of = F.when(kind == word, own.value).otherwise(value_of)
        error_of = F.when(kind == word, own.error).otherwise(error_of)
        present = F.when(kind == word, own.present).otherwise(present)
    refused = [k for k in KINDS if k not in judged_by_text + _own_kinds(target, read_as)]
    if refused:
        # One type error for every refused kind: "<name>: got a <kind> value, expected ...".
        words = F.when(kind == refused[0], F.lit(with_article(refused[0])))
        for word in refused[1:]:
            words = words.when(kind == word, F.lit(with_article(word)))
        reason = F.concat(
            F.lit(f"{name}: got "),
            words,
            F.lit(f" value, expected {expected_form(target, read_as.epoch)}"),
        )
        is_refused = kind.isin(*refused)
        value_of = F.when(is_refused, F.lit(None)).otherwise(value_of)
        error_of = F.when(is_refused, reason).otherwise(error_of)
        present = is_refused | present
    return Typed(value_of, error_of, kind.isNotNull() & present)
