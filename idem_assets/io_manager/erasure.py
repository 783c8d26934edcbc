"""Erased keys kept out of an output before it is written, whatever kind of rows it holds.

The one place a write applies the erasure ledger: tables (pyarrow, polars, pandas),
record-batch streams and Spark DataFrames (filtered by the executors) alike. Only the
columns the output's spec declares erasable are filtered.
"""

from __future__ import annotations

from typing import Any

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasures import ErasureLedger
from idem_assets.io_manager.output import TableOutput, is_spark_frame, is_stream
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.lake.erasure import Erased
from idem_assets.lake.frames import to_arrow


def erased_for(spec: WriteSpec, store: CheckpointStore) -> Erased:
    """The erased keys of the spec's erasable columns (none: nothing is read)."""
    if not spec.erasable_keys:
        return Erased()
    return ErasureLedger(store).erased(spec.erasable_keys)


def without_erased(output: TableOutput, erased: Erased) -> tuple[TableOutput, int | None]:
    """``output`` without the rows holding an erased key, and how many were taken out
    (None when the engine does not count them: a stream, a Spark DataFrame)."""
    rows: Any = output.rows
    if not erased or rows is None:
        return output, 0
    if is_spark_frame(rows):
        from idem_assets.spark.erasure import without_erased_spark

        filtered: Any = without_erased_spark(rows, erased)
        return TableOutput(filtered, output.input_signature, output.schema), None
    if is_stream(rows):
        return TableOutput(_stream(rows, erased), output.input_signature, output.schema), None
    kept, removed = erased.without(to_arrow(rows))
    return TableOutput(kept, output.input_signature, output.schema), removed


def _stream(reader: Any, erased: Erased) -> Any:
    import pyarrow as pa  # here, not at import: see idem_assets._lazy

    return pa.RecordBatchReader.from_batches(
        reader.schema, erased.of(reader.schema.names).without_batches(reader)
    )
