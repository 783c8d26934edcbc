"""What every lake write reports back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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

    @classmethod
    def unchanged(
        cls,
        strategy: str,
        table_uri: str,
        version: int,
        fingerprint: Fingerprint,
        *,
        attempts: int = 1,
        details: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """A write that found its content already stored and committed nothing."""
        return cls(
            strategy,
            table_uri,
            version,
            False,
            0,
            fingerprint,
            attempts=attempts,
            details=dict(details or {}),
        )

    @classmethod
    def written(
        cls,
        strategy: str,
        table_uri: str,
        version: int,
        rows_written: int,
        fingerprint: Fingerprint,
        *,
        rows_inserted: int = 0,
        rows_updated: int = 0,
        rows_deleted: int = 0,
        attempts: int = 1,
        details: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """A write that committed ``version``."""
        return cls(
            strategy,
            table_uri,
            version,
            True,
            rows_written,
            fingerprint,
            rows_inserted=rows_inserted,
            rows_updated=rows_updated,
            rows_deleted=rows_deleted,
            attempts=attempts,
            details=dict(details or {}),
        )
