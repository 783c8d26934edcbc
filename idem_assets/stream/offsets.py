"""The offset log: which files make up each batch, fixed in the checkpoint store before writing.

One tracker per batch in the scope ``stream/<name>/batches``: record id = the batch sequence
number (zero-padded, so string order is number order), payload = the batch's files in their
fixed order with their sha256. ``register`` inserts a record only if its id is new, so it is
the compare-and-set that decides which planner owns sequence number N; a planner that loses
re-reads the log and either works on the winner's batch or plans N + 1. Because a batch is
only planned once every earlier batch is finished and only by a planner that saw all of
them, sequence numbers are dense and no file is ever planned into two live batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from idem_assets.checkpoint import CheckpointStore, Status, Tracker
from idem_assets.landing.files import Landing, files_signature
from idem_assets.landing.store import LandingObject, landing_root
from idem_assets.stream.errors import StreamStateError
from idem_assets.stream.files import OffsetFile, list_stream_files, offset_file
from idem_assets.stream.source import StreamSource

SEQ_DIGITS = 12
# 64 KiB payload limit of a tracker: 100 entries of a long path and a hash stay well inside.
MAX_FILES_PER_BATCH = 100
DONE = frozenset({Status.SUCCEEDED, Status.IGNORED})


def record_id(seq: int) -> str:
    """Tracker record id of batch ``seq``."""
    return f"{seq:0{SEQ_DIGITS}d}"


@dataclass(frozen=True)
class BatchPlan:
    """A micro-batch as fixed in the log: its sequence number and files in order."""

    seq: int
    files: tuple[OffsetFile, ...]
    # Files of an earlier, abandoned batch that this batch takes over (see set_aside_files).
    replaces: int | None = None

    @property
    def signature(self) -> str:
        """sha256 over the files' (relpath, sha256): the batch's content identity."""
        signature = files_signature((f.relpath, f.sha256) for f in self.files)
        return signature or "empty"

    def payload(self) -> dict[str, Any]:
        """The tracker payload."""
        data: dict[str, Any] = {
            "seq": self.seq,
            "files": [f.as_json() for f in self.files],
            "signature": self.signature,
        }
        if self.replaces is not None:
            data["replaces"] = self.replaces
        return data

    @classmethod
    def from_tracker(cls, tracker: Tracker) -> BatchPlan:
        """Rebuild the plan from its tracker, checking it is well formed."""
        where = f"offset log {tracker.scope!r} record {tracker.record_id!r}"
        data = tracker.payload
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise StreamStateError(f"{where}: payload is not a batch plan: {data!r}")
        seq = data.get("seq")
        if not isinstance(seq, int) or record_id(seq) != tracker.record_id:
            raise StreamStateError(f"{where}: payload seq {seq!r} does not match the record id")
        replaces = data.get("replaces")
        if replaces is not None and not isinstance(replaces, int):
            raise StreamStateError(f"{where}: replaces {replaces!r} is not a batch number")
        plan = cls(seq, tuple(OffsetFile.from_json(v, where) for v in data["files"]), replaces)
        if data.get("signature") != plan.signature:
            raise StreamStateError(f"{where}: stored signature does not match its files")
        return plan


@dataclass(frozen=True)
class LoggedBatch:
    """A planned batch and its tracker (status, attempts, last error, result)."""

    plan: BatchPlan
    tracker: Tracker

    @property
    def seq(self) -> int:
        """The batch sequence number (= its Delta txn version)."""
        return self.plan.seq

    @property
    def done(self) -> bool:
        """Committed (succeeded) or abandoned (ignored): later batches may proceed."""
        return self.tracker.status in DONE


def head(batches: Sequence[LoggedBatch]) -> LoggedBatch | None:
    """The oldest batch that is not done: the only one that may be written now."""
    return next((batch for batch in batches if not batch.done), None)


def assigned_files(batches: Iterable[LoggedBatch]) -> set[str]:
    """Every relpath named by any batch, abandoned ones included: never planned again."""
    return {f.relpath for batch in batches for f in batch.plan.files}


class OffsetLog:
    """The batches of one stream in one checkpoint store."""

    def __init__(self, store: CheckpointStore, source: StreamSource) -> None:
        self.store = store
        self.source = source

    def batches(self) -> list[LoggedBatch]:
        """Every batch in sequence order; a gap in the sequence is a StreamStateError."""
        logged = [
            LoggedBatch(BatchPlan.from_tracker(t), t) for t in self.store.list(self.source.scope)
        ]
        for expected, batch in enumerate(logged):
            if batch.seq != expected:
                raise StreamStateError(
                    f"offset log {self.source.scope!r} jumps from batch {expected - 1} to "
                    f"{batch.seq}: records were removed from the checkpoint store"
                )
        return logged

    def get(self, seq: int) -> LoggedBatch:
        """One batch by sequence number."""
        tracker = self.store.get(self.source.scope, record_id(seq))
        if tracker is None:
            raise StreamStateError(f"stream {self.source.name!r} has no batch {seq}")
        return LoggedBatch(BatchPlan.from_tracker(tracker), tracker)

    def fix(self, plan: BatchPlan, max_attempts: int) -> bool:
        """Record ``plan`` unless its sequence number is taken; True if this call recorded it."""
        new = self.store.register(
            self.source.scope, [(record_id(plan.seq), plan.payload())], max_attempts=max_attempts
        )
        return new == 1

    def head_or_plan(
        self, landing_dir: Landing, max_files: int, max_attempts: int
    ) -> LoggedBatch | None:
        """The oldest unfinished batch, else a newly fixed batch of unassigned files, else None."""
        while True:
            batches = self.batches()
            current = head(batches)
            if current is not None:
                return current
            plan = propose(landing_dir, self.source, batches, max_files)
            if plan is None:
                return None
            if self.fix(plan, max_attempts):
                return self.get(plan.seq)
            # Another planner took this sequence number first: read its batch and go on.


def unlisted(
    landing_dir: Landing, source: StreamSource, batches: Sequence[LoggedBatch], limit: int
) -> list[LandingObject]:
    """Up to ``limit`` listed files no batch names yet, in file-name order (nothing is read)."""
    taken = assigned_files(batches)
    fresh = [f for f in list_stream_files(landing_dir, source) if f.relpath not in taken]
    return fresh[:limit]


def unassigned(
    landing_dir: Landing, source: StreamSource, batches: Sequence[LoggedBatch], limit: int
) -> list[OffsetFile]:
    """Up to ``limit`` files no batch names yet, in file-name order, hashed now."""
    root = landing_root(landing_dir)
    taken = assigned_files(batches)
    out: list[OffsetFile] = []
    for item in list_stream_files(root, source):
        if len(out) == limit:
            break
        if item.relpath in taken:
            continue
        entry = offset_file(root, item)
        if entry is not None:
            out.append(entry)
    return out


def propose(
    landing_dir: Landing, source: StreamSource, batches: Sequence[LoggedBatch], max_files: int
) -> BatchPlan | None:
    """The next batch: the first ``max_files`` unassigned files, or None if there are none."""
    if not 1 <= max_files <= MAX_FILES_PER_BATCH:
        raise ValueError(f"max_files must be in 1..{MAX_FILES_PER_BATCH}, got {max_files!r}")
    files = unassigned(landing_dir, source, batches, max_files)
    if not files:
        return None
    return BatchPlan(len(batches), tuple(files))
