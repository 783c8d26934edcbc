"""Erased keys kept out of an output before it is written, whatever kind of rows it holds.

The one place a write applies the erasure ledger: tables (pyarrow, polars, pandas),
record-batch streams and Spark DataFrames (filtered by the executors) alike, whether an
``idem/strategy`` or one of dagster-delta's modes writes them. Only the columns the output
declares erasable (``idem/erasable_keys``) are filtered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from idem_assets.checkpoint import CheckpointStore
from idem_assets.checkpoint.erasures import ErasureLedger
from idem_assets.io_manager.output import TableOutput, is_spark_frame, is_stream
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.lake.erasure import Erased
from idem_assets.lake.fingerprint import Fingerprint, fingerprint
from idem_assets.lake.frames import to_arrow


@dataclass(frozen=True)
class Filtered:
    """An output without the rows holding an erased key, and what was taken out."""

    output: TableOutput
    # Rows taken out (None: the engine does not count them, a stream or a Spark DataFrame).
    removed: int | None
    # Their fingerprint, when rows of a table were taken out: the output as the asset gave
    # it is ``fingerprint(kept).plus(removed_fingerprint)`` (what an append is named by).
    removed_fingerprint: Fingerprint | None = None

    @classmethod
    def untouched(cls, output: TableOutput) -> Filtered:
        """An output nothing was taken out of."""
        return cls(output, 0)


def erased_for(columns: Sequence[str], store: CheckpointStore) -> Erased:
    """The erased keys of the erasable ``columns`` (none declared: nothing is read)."""
    if not columns:
        return Erased()
    return ErasureLedger(store).erased(columns)


def without_erased(output: TableOutput, erased: Erased) -> Filtered:
    """``output`` without the rows holding an erased key, and what was taken out."""
    rows: Any = output.rows
    if not erased or rows is None:
        return Filtered.untouched(output)
    if is_spark_frame(rows):
        from idem_assets.spark.erasure import without_erased_spark

        filtered: Any = without_erased_spark(rows, erased)
        return Filtered(TableOutput(filtered, output.input_signature, output.schema), None)
    if is_stream(rows):
        streamed = _stream(rows, erased)
        return Filtered(TableOutput(streamed, output.input_signature, output.schema), None)
    table = to_arrow(rows)
    kept, removed = erased.without(table)
    if not removed:
        return Filtered.untouched(output)
    taken = table.filter(erased.held(table))
    return Filtered(
        TableOutput(kept, output.input_signature, output.schema), removed, fingerprint(taken)
    )


def _stream(reader: Any, erased: Erased) -> Any:
    import pyarrow as pa  # here, not at import: see idem_assets._lazy

    return pa.RecordBatchReader.from_batches(
        reader.schema, erased.of(reader.schema.names).without_batches(reader)
    )


def erasable_tables(defs: dg.Definitions) -> dict[str, tuple[str, ...]]:
    """Each lake table of ``defs`` that declares erasable keys, and those columns: read from
    ``idem/erasable_keys`` as the IO manager reads it, whether the asset is written by an
    ``idem/strategy`` or in one of dagster-delta's modes."""
    found: dict[str, tuple[str, ...]] = {}
    for item in defs.assets or ():
        specs = item.specs if isinstance(item, dg.AssetsDefinition) else [item]
        for spec in specs:
            if not isinstance(spec, dg.AssetSpec):
                continue
            keys = WriteSpec.erasable_keys_in(spec.metadata)
            if keys:
                found[WriteSpec.table_in(spec.metadata) or "/".join(spec.key.path)] = keys
    return found
