"""An asset's rows on their way to a write: conformed, deduplicated, fingerprinted once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets.io_manager.spec import WriteSpec
from idem_assets.lake import DedupeResult, Fingerprint, PendingFingerprint, dedupe_newest
from idem_assets.lake.fingerprint import resolve
from idem_assets.lake.frames import FrameLike, conform, to_arrow

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class PreparedBatch:
    """An asset's output after deduplication, ready to be written or compared."""

    rows: pa.Table
    input_rows: int
    duplicates_dropped: int
    conflicting_keys: int
    # Started once here, on a background thread; every later step reuses it.
    fingerprint_job: Fingerprint | PendingFingerprint

    @property
    def fingerprint(self) -> Fingerprint:
        """The batch's fingerprint (waits if it is still being computed)."""
        return resolve(self.fingerprint_job)

    @classmethod
    def of(cls, rows: pa.Table) -> PreparedBatch:
        """Rows written as they are (no deduplication), fingerprinted beside the write."""
        return cls(rows, rows.num_rows, 0, 0, PendingFingerprint(rows))

    def dedupe_result(self) -> DedupeResult:
        """The deduplication outcome, for strategies that would otherwise redo it."""
        return DedupeResult(self.rows, self.duplicates_dropped, self.conflicting_keys)


def prepare(spec: WriteSpec, data: FrameLike, schema: pa.Schema | None = None) -> PreparedBatch:
    """Conform to ``schema`` and keep one row per natural key when the spec asks for it."""
    rows = to_arrow(data)
    if schema is not None:
        rows = conform(rows, schema)
    # With deletes, the merge orders each key's events itself (a delete wins a tie); a
    # history keeps every version of a key.
    if not spec.dedupe or not spec.natural_key or spec.delete_column or spec.strategy == "history":
        return PreparedBatch.of(rows)
    sort_by = [c for c in (spec.partition_column, *spec.prune_columns) if c]
    result = dedupe_newest(rows, spec.natural_key, spec.version_column, sort_by=sort_by)
    return PreparedBatch(
        result.rows,
        rows.num_rows,
        result.duplicates_dropped,
        result.conflicting_keys,
        PendingFingerprint(result.rows),
    )
