"""What people and sensors do with a stream besides ingesting: look ahead, retry, set aside."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from idem_assets.checkpoint import CheckpointStore, InvalidTransition, Status
from idem_assets.checkpoint.leases import lease_live
from idem_assets.lake import Commit, LakeTable, append_exactly_once
from idem_assets.landing.files import Discovery, Landing, listing_hint
from idem_assets.landing.store import LandingObject, landing_root
from idem_assets.stream.batch import (
    META_ABANDONED,
    META_BATCH,
    META_QUARANTINED,
    META_SIGNATURE,
    META_STREAM,
    find_batch_commit,
)
from idem_assets.stream.errors import StreamError, StreamStateError
from idem_assets.stream.files import OffsetFile
from idem_assets.stream.offsets import (
    BatchPlan,
    LoggedBatch,
    OffsetLog,
    head,
    record_id,
    unlisted,
)
from idem_assets.stream.source import StreamSource

_MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class Outlook:
    """What a run would find now: the oldest open batch (and whether it is due), new files."""

    stream: str
    head: LoggedBatch | None
    due: bool
    unassigned: tuple[LandingObject, ...]
    hint: str | None = None  # what the listing says of the unassigned files (listing_hint)

    def run_key(self) -> str | None:
        """A key naming the work a run would do, or None if no run is needed now.

        A due open batch is named by its number and attempt, so each retry is one request;
        new files by the listing's hint of the files a run would take (names, sizes, ETags
        or mtimes; nothing is downloaded), so the same files never trigger twice and every
        new file triggers once.
        """
        if self.head is not None:
            if not self.due:
                return None
            return f"{self.stream}:batch-{self.head.seq}:attempt-{self.head.tracker.attempts}"
        return None if self.hint is None else f"{self.stream}:files-{self.hint[:24]}"


def outlook(
    store: CheckpointStore,
    source: StreamSource,
    landing_dir: Landing,
    limit: int,
    now: float | None = None,
) -> Outlook:
    """Read-only look at the stream for a sensor: nothing is planned or claimed."""
    batches = OffsetLog(store, source).batches()
    current = head(batches)
    if current is not None:
        due_at = current.tracker.next_attempt_at
        due = (
            current.tracker.status is not Status.EXHAUSTED
            and due_at is not None
            and due_at <= (store.now() if now is None else now)
        )
        return Outlook(source.name, current, due, ())
    root = landing_root(landing_dir)
    fresh = tuple(unlisted(root, source, batches, limit))
    return Outlook(source.name, None, False, fresh, listing_hint(root, Discovery(fresh)))


def retry_batch(store: CheckpointStore, source: StreamSource, seq: int) -> bool:
    """Give an exhausted batch a fresh attempt budget (after fixing its cause)."""
    return store.redrive(source.scope, [record_id(seq)]) == 1


def set_aside_files(
    store: CheckpointStore,
    source: StreamSource,
    table: LakeTable,
    seq: int,
    files: Sequence[str],
    reason: str,
    *,
    max_attempts: int = 5,
) -> int | None:
    """Abandon the blocked batch ``seq`` and re-plan its other files as a new batch.

    The set-aside files are never read again (land corrections as new files); the reason
    and the files are kept on the abandoned batch's tracker. Steps, each safe to repeat:
    1. the batch must not be under a live lease; 2. an empty commit with its txn version
    fences the table, so an ingester whose lease ran out can no longer commit it; 3. its
    tracker becomes ignored; 4. the remaining files are fixed as a new batch that records
    which batch it replaces. Returns the new batch's number, or None if no file remains.
    """
    if not files or not reason.strip():
        raise ValueError("set_aside_files needs the files to set aside and a reason")
    log = OffsetLog(store, source)
    batch = log.get(seq)
    named = {f.relpath for f in batch.plan.files}
    strangers = sorted(set(files) - named)
    if strangers:
        raise ValueError(
            f"batch {seq} of stream {source.name!r} has no file(s) "
            f"{', '.join(strangers)}; it holds {', '.join(sorted(named))}"
        )
    keep = tuple(f for f in batch.plan.files if f.relpath not in set(files))
    if batch.tracker.status is Status.IGNORED:
        return _replacement(log, batch, keep, max_attempts)
    _require_abandonable(log, batch)
    _fence(source, table, batch.plan, reason)
    note = f"set aside {', '.join(sorted(files))}: {reason}"[:_MAX_REASON_CHARS]
    try:
        store.ignore(source.scope, record_id(seq), note)
    except InvalidTransition as error:
        raise StreamError(
            f"batch {seq} of stream {source.name!r} was claimed while being set "
            f"aside; call set_aside_files again: {error}"
        ) from None
    return _replacement(log, batch, keep, max_attempts)


def _require_abandonable(log: OffsetLog, batch: LoggedBatch) -> None:
    current = head(log.batches())
    if current is None or current.seq != batch.seq:
        where = "none is open" if current is None else f"that is batch {current.seq}"
        raise StreamError(f"only the oldest unfinished batch can be set aside; {where}")
    tracker = batch.tracker
    if lease_live(tracker, log.store.now()):
        raise StreamError(
            f"batch {batch.seq} is being ingested by {tracker.lease_owner}; "
            "set files aside only once it failed or its lease ran out"
        )


def _fence(source: StreamSource, table: LakeTable, plan: BatchPlan, reason: str) -> None:
    fence = append_exactly_once(
        table,
        source.schema.empty_table(),
        source.app_id,
        plan.seq,
        schema=source.schema,
        commit=Commit(
            {
                META_STREAM: source.name,
                META_BATCH: plan.seq,
                META_SIGNATURE: plan.signature,
                META_QUARANTINED: 0,
                META_ABANDONED: reason[:_MAX_REASON_CHARS],
            }
        ),
    )
    if fence.committed:
        return
    opened = table.open()
    entry = None if opened is None else find_batch_commit(opened, source, plan.seq)
    if entry is not None and entry.get(META_ABANDONED):
        return  # fenced by an earlier call that stopped half-way
    raise StreamStateError(
        f"batch {plan.seq} of stream {source.name!r} is already in {table.uri} (an ingester "
        "whose lease had run out committed it): nothing was set aside; the next run records "
        "it as done"
    )


def _replacement(
    log: OffsetLog, batch: LoggedBatch, keep: tuple[OffsetFile, ...], max_attempts: int
) -> int | None:
    if not keep:
        return None
    while True:
        batches = log.batches()
        existing = next((b for b in batches if b.plan.replaces == batch.seq), None)
        if existing is not None:
            return existing.seq
        plan = BatchPlan(len(batches), keep, replaces=batch.seq)
        if log.fix(plan, max_attempts):
            return plan.seq
