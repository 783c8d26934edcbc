"""What the ingester reports: settings, progress steps, per-batch outcomes and a run summary."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from idem_assets.stream.offsets import MAX_FILES_PER_BATCH


@dataclass(frozen=True)
class StreamSettings:
    """How much one run takes, and how it holds and retries its batch."""

    max_files_per_batch: int = 20
    max_batches_per_run: int = 10
    # A crashed ingester's batch is taken over one lease later; heartbeats keep it while alive.
    lease_seconds: float = 120.0
    # Delay before a failed batch may be tried again; None: the store's doubling backoff.
    retry_delay_seconds: float | None = None
    max_attempts: int = 5

    def __post_init__(self) -> None:
        if not 1 <= self.max_files_per_batch <= MAX_FILES_PER_BATCH:
            raise ValueError(
                f"max_files_per_batch must be in 1..{MAX_FILES_PER_BATCH}, "
                f"got {self.max_files_per_batch!r}"
            )
        if self.max_batches_per_run < 1:
            raise ValueError(f"max_batches_per_run must be >= 1, got {self.max_batches_per_run!r}")
        if not (math.isfinite(self.lease_seconds) and self.lease_seconds > 0):
            raise ValueError(f"lease_seconds must be > 0, got {self.lease_seconds!r}")
        if self.retry_delay_seconds is not None and not self.retry_delay_seconds >= 0:
            raise ValueError(
                f"retry_delay_seconds must be >= 0 or None, got {self.retry_delay_seconds!r}"
            )
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts!r}")


@dataclass(frozen=True)
class StreamStep:
    """A point the ingester passed, for progress logs; ``detail`` holds small JSON-ready facts."""

    # head, claimed, file_read, built, committed, quarantined, succeeded
    step: str
    seq: int
    detail: Mapping[str, Any] = field(default_factory=dict)


Observer = Callable[[StreamStep], None]


@dataclass(frozen=True)
class BatchOutcome:
    """One batch finished by this run: written now (committed) or found written (reconciled)."""

    seq: int
    status: str  # "committed" | "reconciled"
    files: int
    raw_rows: int
    rows: int
    quarantined: int
    fingerprint: str | None  # of the batch's rows as committed
    signature: str  # of the batch's files (relpath, sha256)
    table_version: int
    attempts: int
    erased: int = 0  # valid and quarantined rows left out: they hold an erased key

    def as_result(self) -> dict[str, Any]:
        """The tracker result kept in the checkpoint store."""
        return asdict(self)


@dataclass(frozen=True)
class RunReport:
    """What one run did and why it stopped ("drained", "max_batches" or "busy")."""

    stream: str
    outcomes: tuple[BatchOutcome, ...]
    stopped: str
    detail: str
    txn_version: int | None  # the stream's Delta txn version after the run
    table_version: int | None

    def count(self, status: str) -> int:
        """How many batches ended with ``status``."""
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    @property
    def rows(self) -> int:
        """Rows appended by the batches this run committed."""
        return sum(o.rows for o in self.outcomes if o.status == "committed")

    @property
    def files(self) -> int:
        """Files in the batches this run finished."""
        return sum(o.files for o in self.outcomes)
