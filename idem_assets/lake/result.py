"""What every lake write reports back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from idem_assets.lake.fingerprint import Fingerprint


@dataclass(frozen=True)
class WriteResult:
    """Outcome of one idempotent write: whether it committed, and what it holds."""

    strategy: str
    table_uri: str
    # Table version after the write (unchanged when nothing was committed).
    version: int
    committed: bool
    rows_written: int
    # Fingerprint of the rows this write owns: the partition slice (overwrite),
    # the deduplicated batch (merge/append) or the whole table (replace).
    fingerprint: Fingerprint
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    attempts: int = 1
    details: dict[str, Any] = field(default_factory=dict)

    def as_metadata(self) -> dict[str, Any]:
        """Flat, JSON-friendly view for logs and materialization metadata."""
        data = asdict(self)
        data["fingerprint"] = str(self.fingerprint)
        data["fingerprint_rows"] = self.fingerprint.rows
        return data
