"""One try of a write, decided on a fresh snapshot and tried again when it lost a race."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, Unpack

from deltalake import DeltaTable

from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.result import Proof, RowCounts, WriteResult
from idem_assets.lake.tables import LakeTable, with_commit_retries

T = TypeVar("T")


@dataclass(frozen=True)
class Attempt:
    """One try of a write: the table as this try found it, and the results it reports."""

    target: LakeTable
    strategy: str
    number: int  # 1 for the first try
    table: DeltaTable | None  # None: no table yet

    def unchanged(
        self,
        fingerprint: Fingerprint,
        *,
        proof: Proof,
        details: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """The content was already stored: nothing committed, the table at its version."""
        assert self.table is not None, "an unchanged write found a table"
        return WriteResult.unchanged(
            self.strategy,
            self.target.uri,
            self.table.version(),
            fingerprint,
            proof=proof,
            attempts=self.number,
            details=details,
        )

    def written(
        self,
        version: int,
        rows_written: int,
        fingerprint: Fingerprint,
        *,
        details: Mapping[str, Any] | None = None,
        **counts: Unpack[RowCounts],
    ) -> WriteResult:
        """This try committed ``version``."""
        return WriteResult.written(
            self.strategy,
            self.target.uri,
            version,
            rows_written,
            fingerprint,
            attempts=self.number,
            details=details,
            **counts,
        )

    def inserted(
        self,
        version: int,
        rows: int,
        fingerprint: Fingerprint,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """This try committed ``version`` adding ``rows`` rows, and changed no stored row."""
        return self.written(version, rows, fingerprint, rows_inserted=rows, details=details)


def commit_retried(
    target: LakeTable,
    strategy: str,
    once: Callable[[Attempt], T],
    *,
    snapshot: Callable[[], DeltaTable | None] | None = None,
) -> T:
    """Decide and commit by ``once`` on a fresh snapshot; again when a concurrent commit
    won or an answer from storage was cut (``with_commit_retries``).

    ``snapshot`` finds the table each try starts from (default: ``target`` at its newest
    version); it runs inside the try, so a cut answer there is retried too.
    """
    find = snapshot or target.open
    return with_commit_retries(lambda number: once(Attempt(target, strategy, number + 1, find())))
