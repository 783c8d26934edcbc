"""What every lake write reports back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict, Unpack

from idem_assets.lake.fingerprint import Fingerprint


class Proof(StrEnum):
    """How a write that committed nothing knew it had nothing to commit.

    Shown as the ``no_op_proof`` metadata (the empty string for a write that committed).
    """

    NONE = ""  # it committed
    CHECKPOINT = "checkpoint"  # same rows as the last settled write, its files untouched
    INPUTS = "inputs"  # same inputs as the last settled write: nothing computed or written
    CONTENT = "content"  # the new rows compared with the stored ones (or the merge planned)
    TXN = "txn"  # an append whose Delta txn id the table already holds, with the same rows
    TABLE_EXISTS = "ignore"  # mode ignore: the table exists, so nothing is written


class RowCounts(TypedDict, total=False):
    """The rows a committed write inserted, updated and deleted (0 when not given)."""

    rows_inserted: int
    rows_updated: int
    rows_deleted: int


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
    proof: Proof = Proof.NONE

    @classmethod
    def unchanged(
        cls,
        strategy: str,
        table_uri: str,
        version: int,
        fingerprint: Fingerprint,
        *,
        proof: Proof,
        attempts: int = 1,
        details: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """A write that found its content already stored and committed nothing."""
        if proof is Proof.NONE:
            raise ValueError("an unchanged write names how it was proven")
        return cls(
            strategy,
            table_uri,
            version,
            False,
            0,
            fingerprint,
            attempts=attempts,
            details=dict(details or {}),
            proof=proof,
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
        attempts: int = 1,
        details: Mapping[str, Any] | None = None,
        **counts: Unpack[RowCounts],
    ) -> WriteResult:
        """A write that committed ``version``."""
        return cls(
            strategy,
            table_uri,
            version,
            True,
            rows_written,
            fingerprint,
            attempts=attempts,
            details=dict(details or {}),
            **counts,
        )
