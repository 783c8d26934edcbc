"""The materialization metadata of an IO manager output, assembled in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from idem_assets.io_manager.spec import WriteSpec
from idem_assets.lake import Proof, WriteResult


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
    spec: WriteSpec,
    result: WriteResult,
    label: str,
    counts: RowCounts,
    *,
    engine: str | None = None,
    fingerprint: str | None = None,
) -> dict[str, Any]:
    """Metadata of one output: what was written or proven unchanged, where, and its rows.

    ``fingerprint`` overrides the result's (a skip reports the settled write's as stored).
    """
    proof = result.proof
    # A skip on unchanged inputs ran no writer: it has no write counts to report.
    wrote = proof is not Proof.INPUTS
    metadata: dict[str, Any] = {"strategy": spec.strategy}
    if engine is not None:
        metadata["engine"] = engine
    metadata.update(
        {
            "table_uri": dg.MetadataValue.path(result.table_uri),
            "partition_range": label,
            "delta_version": result.version,
            "committed": result.committed,
            "fingerprint": str(result.fingerprint) if fingerprint is None else fingerprint,
            "dagster/row_count": counts.rows,
            "rows_written": result.rows_written,
        }
    )
    if wrote:
        metadata["rows_inserted"] = result.rows_inserted
        metadata["rows_updated"] = result.rows_updated
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
    # no data read), "inputs" (the same, with unchanged inputs: nothing computed) or
    # "content" (compared with the stored rows).
    metadata["no_op_proof"] = proof.value
    return metadata
