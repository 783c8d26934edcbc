"""What a write commits with, and one try of a write, decided on a fresh snapshot and tried
again when it lost a race."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from deltalake import CommitProperties, DeltaTable, Transaction

from idem_assets.lake.fingerprint import Fingerprint, PendingFingerprint, fingerprint, resolve
from idem_assets.lake.result import Proof, RowCounts, WriteResult
from idem_assets.lake.tables import (
    DEFAULT_OPTIONS,
    LakeTable,
    WriteOptions,
    commit_properties,
    with_commit_retries,
)

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")


@dataclass(frozen=True)
class Commit:
    """What a write commits with besides its rows: the commit's metadata, how its files are
    written and its table created, the rows' fingerprint when the caller already has it,
    and a Delta txn (app id, version) for the commit to record.

    A writer applies what concerns it (its docstring says which): the Spark writers and
    ``overwrite_stream`` fingerprint the rows themselves and take no ``options``; the Spark
    overwrite and merge skip a write whose ``txn`` the table has recorded, the others record
    it.
    """

    metadata: Mapping[str, Any] = field(default_factory=dict)
    options: WriteOptions = DEFAULT_OPTIONS
    # Of the rows as the writer writes them (conformed, deduplicated): it is trusted.
    fingerprint: Fingerprint | PendingFingerprint | None = None
    txn: Transaction | None = None

    def with_metadata(self, entries: Mapping[str, Any]) -> Commit:
        """This commit with ``entries`` added to its metadata (replacing equal keys)."""
        return dataclasses.replace(self, metadata={**self.metadata, **entries})

    def with_fingerprint(self, known: Fingerprint | PendingFingerprint) -> Commit:
        """This commit for rows whose fingerprint is ``known``."""
        return dataclasses.replace(self, fingerprint=known)

    def fingerprint_of(self, rows: pa.Table) -> Fingerprint:
        """The fingerprint of ``rows``: the known one, else hashed now."""
        return fingerprint(rows) if self.fingerprint is None else resolve(self.fingerprint)

    def pending_fingerprint(self, rows: pa.Table) -> Fingerprint | PendingFingerprint:
        """The fingerprint of ``rows``: the known one, else hashed on another thread."""
        return PendingFingerprint(rows) if self.fingerprint is None else self.fingerprint

    def properties(
        self, extra: Mapping[str, Any] | None = None, txn: Transaction | None = None
    ) -> CommitProperties:
        """delta-rs commit properties (``commit_properties``): the metadata with ``extra``,
        and this commit's txn with the writer's own ``txn``."""
        txns = [t for t in (self.txn, txn) if t is not None]
        return commit_properties({**self.metadata, **(extra or {})}, txns)


# A commit with no metadata, the default options, no known fingerprint and no txn.
DEFAULT_COMMIT = Commit()


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
