"""The materialization metadata of an IO manager output, assembled in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg

from idem_assets.lake import Proof, WriteResult

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class RowCounts:
    """How an output's rows were counted on their way to the table.

    A count is None where its path does not know it, and is then left out of the
    metadata: the Spark engine counts no input rows on the driver, a skip on unchanged
    inputs counts nothing.
    """

    rows: int
    duplicates_dropped: int = 0
    input_rows: int | None = None
    conflicting_keys: int | None = None
    streamed: bool | None = None


def output_metadata(
    named: tuple[str, str],
    result: WriteResult,
    label: str,
    counts: RowCounts,
    *,
    engine: str | None = None,
    fingerprint: str | None = None,
    columns: pa.Schema | None = None,
) -> dict[str, Any]:
    """Metadata of one output: what was written or proven unchanged, where, and its rows.

    ``named`` is the metadata entry that names the write (``("strategy", "overwrite")``,
    ``("mode", "append")``); ``fingerprint`` overrides the result's (a skip reports the
    settled write's as stored); ``columns`` are the table's columns after the write.
    """
    proof = result.proof
    # A skip on unchanged inputs ran no writer: it has no write counts to report.
    wrote = proof is not Proof.INPUTS
    key, value = named
    metadata: dict[str, Any] = {key: value}
    if engine is not None:
        metadata["engine"] = engine
    metadata.update(
        {
            "table_uri": dg.MetadataValue.path(result.table_uri),
            "partition_range": label,
            "delta_version": result.version,
            "table_version": result.version,  # dagster-delta's name for it
            "committed": result.committed,
            "fingerprint": str(result.fingerprint) if fingerprint is None else fingerprint,
            "dagster/row_count": counts.rows,
            "rows_written": result.rows_written,
        }
    )
    if wrote:
        metadata["rows_inserted"] = result.rows_inserted
        metadata["rows_updated"] = result.rows_updated
        metadata["rows_deleted"] = result.rows_deleted
    if counts.input_rows is not None:
        metadata["input_rows"] = counts.input_rows
    metadata["duplicates_dropped"] = counts.duplicates_dropped
    if counts.conflicting_keys is not None:
        metadata["conflicting_keys"] = counts.conflicting_keys
    if counts.streamed is not None:
        metadata["streamed"] = counts.streamed
    if wrote:
        metadata["write_attempts"] = result.attempts
    # How a no-op was proven: "checkpoint" (files unchanged since the last settled write,
    # no data read), "inputs" (the same, with unchanged inputs: nothing computed),
    # "content" (compared with the stored rows), "txn" or "ignore" (see ``Proof``).
    metadata["no_op_proof"] = proof.value
    stats = result.details.get("merge_stats")
    if stats is not None:
        metadata["merge_stats"] = dg.MetadataValue.json(dict(stats))
        metadata["num_output_rows"] = int(stats.get("num_output_rows", 0))
    if "txn_app_id" in result.details:
        metadata["txn_app_id"] = result.details["txn_app_id"]
    if columns is not None:
        # What dagster-deltalake shows: the table's columns.
        metadata["dagster/column_schema"] = dg.MetadataValue.table_schema(
            dg.TableSchema(columns=[dg.TableColumn(name=f.name, type=str(f.type)) for f in columns])
        )
    return metadata
