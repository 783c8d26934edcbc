"""JSON values of any kind to contract types: each value is judged by its own JSON kind.

A JSON Lines file is parsed into VARIANT values, which keep the kind the file wrote
(string, integer, fractional number, boolean, object, array): the kinds Polars infers for
a consistently written key. Strings are read with the source's declared spelling
(separators, time zone), numbers as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing.coerce import ReadAs
from idem_assets.spark.coerce import coerce
from idem_assets.spark.values import Raw, Stages, Typed

_INTEGERS = ("BIGINT", "INT", "SMALLINT", "TINYINT")


def json_kind(value: Column) -> Column:
    """The kind of a JSON value (a VARIANT), as the local reader names its type; null if null."""
    schema = F.schema_of_variant(value)
    return (F.when(schema == "STRING", F.lit("string"))
            .when(schema.isin(*_INTEGERS) | schema.rlike(r"^DECIMAL\(\d+,0\)$"), F.lit("integer"))
            .when(schema.startswith("DECIMAL") | schema.isin("DOUBLE", "FLOAT"), F.lit("float"))
            .when(schema == "BOOLEAN", F.lit("boolean"))
            .when(schema.startswith("OBJECT"), F.lit("object"))
            .when(schema.startswith("ARRAY"), F.lit("list")))


def json_text(value: Column) -> Column:
    """A JSON value's text: strings as they are, numbers' digits, objects and arrays as JSON."""
    return F.try_variant_get(value, "$", "string")


@dataclass(frozen=True)
class JsonTexts:
    """Texts of a JSON column staged in an earlier projection (see ``values.judged_text``)."""

    stripped: Column | None = None  # stripped, non-blank text of string values
    floats: Column | None = None  # Polars' text of fractional numbers


def json_float(value: Column) -> Column:
    """A JSON number as a double (as Polars reads a fractional number)."""
    return F.try_variant_get(value, "$", "double")


def json_typed(name: str, value: Column, kind: Column, text: Column, staged: JsonTexts,
               target: pa.DataType, typed: Column, read_as: ReadAs, stages: Stages) -> Typed:
    """The contract-typed value of a JSON value and its reason, by the value's kind.

    ``kind`` and ``text`` are ``json_kind`` and ``json_text`` of ``value``.
    """
    if pa.types.is_string(target):
        # Text columns take every value as text, as the local reader's JSON schema says.
        return coerce(name, Raw(text, "string", stages=stages), target, typed, read_as)
    raws = {
        "string": Raw(text, "string", staged.stripped, stages=stages.child("s")),
        "integer": Raw(F.try_variant_get(value, "$", "decimal(38,0)"), "integer",
                       stages=stages.child("i")),
        "float": Raw(json_float(value), "float", staged.floats, stages=stages.child("f")),
        "boolean": Raw(F.try_variant_get(value, "$", "boolean"), "boolean"),
        "object": Raw(text, "object"),
        "list": Raw(text, "list"),
    }
    coerced = [(word, coerce(name, raw, target, typed, read_as)) for word, raw in raws.items()]
    first, result = coerced[0]
    value_of, error_of = F.when(kind == first, result.value), F.when(kind == first, result.error)
    for word, result in coerced[1:]:
        value_of = value_of.when(kind == word, result.value)
        error_of = error_of.when(kind == word, result.error)
    return Typed(value_of, error_of)
