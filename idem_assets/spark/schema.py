"""The lake's Arrow schemas in Spark terms, and casting a DataFrame to one of them."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from idem_assets.lake.frames import is_text
from idem_assets.lake.predicates import quote_identifier

__all__ = ["col", "conform_spark", "spark_schema", "spark_type"]


def spark_type(kind: pa.DataType) -> T.DataType:
    """The Spark type that stores Arrow type ``kind`` without loss."""
    simple: list[tuple[object, T.DataType]] = [
        (pa.types.is_int64, T.LongType()),
        (pa.types.is_int32, T.IntegerType()),
        (pa.types.is_int16, T.ShortType()),
        (pa.types.is_int8, T.ByteType()),
        (pa.types.is_float64, T.DoubleType()),
        (pa.types.is_float32, T.FloatType()),
        (pa.types.is_boolean, T.BooleanType()),
        (pa.types.is_date32, T.DateType()),
        (pa.types.is_binary, T.BinaryType()),
        (pa.types.is_large_binary, T.BinaryType()),
    ]
    for check, spark in simple:
        if check(kind):  # type: ignore[operator]
            return spark
    if is_text(kind):
        return T.StringType()
    if pa.types.is_decimal128(kind):
        return T.DecimalType(kind.precision, kind.scale)
    if pa.types.is_timestamp(kind):
        # Zoned Arrow timestamps are instants (Spark TIMESTAMP); naive ones are wall clocks.
        return T.TimestampType() if kind.tz is not None else T.TimestampNTZType()
    raise TypeError(f"Arrow type {kind} has no Spark equivalent in the lake schemas")


def spark_schema(schema: pa.Schema) -> T.StructType:
    """A Spark StructType with the same names and types (every field nullable, as in Delta)."""
    return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in schema])


def col(name: str) -> Column:
    """A column by plain identifier (validated, backquoted so no name is parsed as SQL)."""
    quote_identifier(name)
    return F.col(f"`{name}`")


def conform_spark(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """Select and cast ``df`` to ``schema``; a missing column is a clear error.

    Casts run under the session's ANSI mode, so a value that does not fit fails the job
    instead of turning into a null.
    """
    missing = [name for name in schema.names if name not in df.columns]
    if missing:
        raise ValueError(
            f"data lacks column(s) {missing} required by the table schema {schema.names}"
        )
    target = spark_schema(schema)
    current = dict(df.dtypes)
    columns = []
    for field in target.fields:
        column = col(field.name)
        if current[field.name] != field.dataType.simpleString():
            column = column.cast(field.dataType)
        columns.append(column.alias(field.name))
    return df.select(*columns)
