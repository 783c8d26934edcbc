"""Exactly-once micro-batch ingestion of a stream folder into a Delta table.

Per batch: fix its files in the offset log, claim it (lease), read and check every file,
commit the rows with the Delta txn (app id = stream, version = batch number), commit its
quarantine rows with the quarantine txn, then mark the tracker succeeded. A restart finds
the txn version already at the batch number and only finishes the bookkeeping.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from dataclasses import dataclass

from idem_assets.checkpoint import CheckpointStore, Claim, LeaseLost, Status, Tracker
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake import Commit, LakeTable, append_exactly_once, txn_version
from idem_assets.landing.files import Landing
from idem_assets.landing.quarantine import append_quarantine
from idem_assets.landing.store import landing_root
from idem_assets.stream.batch import (
    META_ABANDONED,
    META_BATCH,
    META_FINGERPRINT,
    META_QUARANTINED,
    META_SIGNATURE,
    META_STREAM,
    BuiltBatch,
    batch_metadata,
    build_batch,
    find_batch_commit,
)
from idem_assets.stream.errors import StreamBlocked, StreamStateError
from idem_assets.stream.files import notes_by_file, read_offset_file
from idem_assets.stream.offsets import DONE, BatchPlan, OffsetLog, record_id
from idem_assets.stream.report import (
    BatchOutcome,
    Observer,
    RunReport,
    StreamSettings,
    StreamStep,
)
from idem_assets.stream.source import StreamSource


@dataclass(frozen=True)
class Busy:
    """The oldest unfinished batch is another ingester's right now (a live lease), and why."""

    reason: str


def default_owner() -> str:
    """A claim owner unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "unknown"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


class StreamIngester:
    """Moves a stream's new files into its Delta table, batch by batch, exactly once."""

    def __init__(
        self,
        store: CheckpointStore,
        source: StreamSource,
        landing_dir: Landing,
        table: LakeTable,
        quarantine: LakeTable,
        *,
        owner: str | None = None,
        settings: StreamSettings | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.store = store
        self.source = source
        self.landing_dir = landing_root(landing_dir)
        self.table = table
        self.quarantine = quarantine
        self.owner = owner or default_owner()
        self.settings = settings or StreamSettings()
        self.log = OffsetLog(store, source)
        self._observer = observer

    def run(self) -> RunReport:
        """Finish up to ``max_batches_per_run`` batches, oldest first; stop early when idle."""
        outcomes: list[BatchOutcome] = []
        stopped, detail = "max_batches", ""
        for _ in range(self.settings.max_batches_per_run):
            step = self.ingest_next()
            if step is None:
                stopped = "drained"
                break
            if isinstance(step, Busy):
                stopped, detail = "busy", step.reason
                break
            outcomes.append(step)
        table = self.table.open()
        return RunReport(
            self.source.name,
            tuple(outcomes),
            stopped,
            detail,
            txn_version(table, self.source.app_id),
            None if table is None else table.version(),
        )

    def ingest_next(self) -> BatchOutcome | Busy | None:
        """Finish the oldest unfinished batch (planning one from new files if none is open).

        None: nothing to do. Busy: another ingester holds it. Raises StreamBlocked when it
        failed and is not due again, and the batch's own error when this attempt fails.
        """
        settings = self.settings
        while True:
            current = self.log.head_or_plan(
                self.landing_dir, settings.max_files_per_batch, settings.max_attempts
            )
            if current is None:
                return None
            plan = current.plan
            self._observe(
                "head", plan.seq, signature=plan.signature, files=[f.relpath for f in plan.files]
            )
            claims = self.store.claim(
                self.source.scope,
                self.owner,
                lease_seconds=settings.lease_seconds,
                record_ids=[record_id(plan.seq)],
            )
            if not claims:
                busy = self._unclaimable(plan.seq)
                if busy is None:
                    continue  # finished by someone else since we read the log
                return busy
            try:
                return self._process(claims[0], plan)
            except LeaseLost as lost:
                return Busy(f"lost batch {plan.seq} to another ingester: {lost}")

    def _process(self, claim: Claim, plan: BatchPlan) -> BatchOutcome:
        self._observe("claimed", plan.seq, attempt=claim.attempts)
        try:
            table = self.table.open()
            done = txn_version(table, self.source.app_id)
            self._check_order(plan.seq, done)
            if done is not None and done >= plan.seq:
                return self._reconcile(claim, plan, None)
            claim, built = self._read(claim, plan)
            claim = self.store.extend(claim, self.settings.lease_seconds)
            result = append_exactly_once(
                self.table,
                built.rows,
                self.source.app_id,
                plan.seq,
                schema=self.source.schema,
                commit=Commit(batch_metadata(self.source, built)),
            )
            if not result.committed:
                # A holder whose lease had run out committed it first: only bookkeeping is left.
                return self._reconcile(claim, plan, built)
            self._observe(
                "committed",
                plan.seq,
                table_version=result.version,
                fingerprint=str(result.fingerprint),
            )
            self._write_quarantine(built)
            outcome = BatchOutcome(
                plan.seq,
                "committed",
                len(plan.files),
                built.raw_rows,
                built.rows.num_rows,
                built.quarantine.num_rows,
                str(built.fingerprint),
                plan.signature,
                result.version,
                claim.attempts,
                built.erased,
            )
            self._succeed(claim, outcome)
            return outcome
        except LeaseLost:
            raise
        except Exception as error:
            self._record_failure(claim, plan.seq, error)
            raise

    def _read(self, claim: Claim, plan: BatchPlan) -> tuple[Claim, BuiltBatch]:
        reads = []
        for index, entry in enumerate(plan.files):
            reads.append(read_offset_file(self.landing_dir, self.source, entry, plan.seq))
            claim = self.store.extend(claim, self.settings.lease_seconds)
            self._observe("file_read", plan.seq, index=index, file=entry.relpath)
        built = build_batch(self.source, plan, reads)
        if self.source.erasable_keys:
            erased = ErasureLedger(self.store).erased(self.source.erasable_keys)
            built = built.without(erased, self.source.name)
        self._observe(
            "built",
            plan.seq,
            fingerprint=str(built.fingerprint),
            signature=plan.signature,
            rows=built.rows.num_rows,
            quarantined=built.quarantine.num_rows,
            notes=notes_by_file(reads),
        )
        return claim, built

    def _reconcile(self, claim: Claim, plan: BatchPlan, built: BuiltBatch | None) -> BatchOutcome:
        """Batch already in the table: verify it is this plan, finish quarantine, mark done."""
        table = self.table.open()
        assert table is not None
        done = txn_version(table, self.source.app_id)
        entry = find_batch_commit(table, self.source, plan.seq)
        if entry is None and done != plan.seq:
            raise StreamStateError(
                f"table {self.table.uri} is at txn version {done} of stream {self.source.name!r}, "
                f"past batch {plan.seq}, whose commit is not in its recent history: cannot "
                "verify it holds this batch's files (was the checkpoint store reset?)"
            )
        if entry is not None:
            if entry.get(META_ABANDONED):
                raise StreamStateError(
                    f"batch {plan.seq} of stream {self.source.name!r} was set aside, yet its "
                    "tracker is still open in the checkpoint store"
                )
            if entry.get(META_SIGNATURE) != plan.signature:
                raise StreamStateError(
                    f"table {self.table.uri} holds batch {plan.seq} of stream "
                    f"{self.source.name!r} with other files than the offset log names (file "
                    f"signature {entry.get(META_SIGNATURE)} vs {plan.signature}): the checkpoint "
                    "store and the table belong to different histories"
                )
        quarantined = None if entry is None else int(entry[META_QUARANTINED])
        quarantine_done = txn_version(self.quarantine.open(), self.source.quarantine_app_id)
        behind = quarantine_done is None or quarantine_done < plan.seq
        if quarantined is None or (quarantined and behind):
            if built is None:
                claim, built = self._read(claim, plan)
            self._write_quarantine(built)
        outcome = self._reconciled(plan, claim, entry, built, table.version())
        self._succeed(claim, outcome)
        return outcome

    def _reconciled(
        self,
        plan: BatchPlan,
        claim: Claim,
        entry: dict | None,
        built: BuiltBatch | None,
        version: int,
    ) -> BatchOutcome:
        if entry is not None:
            rows = int(entry.get("operationMetrics", {}).get("num_added_rows", 0))
            quarantined = int(entry[META_QUARANTINED])
            fp = entry.get(META_FINGERPRINT)
            version = int(entry.get("version", version))
        else:
            assert built is not None
            rows, quarantined = built.rows.num_rows, built.quarantine.num_rows
            fp = str(built.fingerprint)
        return BatchOutcome(
            plan.seq,
            "reconciled",
            len(plan.files),
            rows + quarantined,
            rows,
            quarantined,
            fp,
            plan.signature,
            version,
            claim.attempts,
        )

    def _write_quarantine(self, built: BuiltBatch) -> None:
        # Written after the rows' commit: a batch that never reached the table (crashed, or
        # set aside) leaves no quarantine rows behind to be duplicated by its replacement.
        if built.quarantine.num_rows:
            append_quarantine(
                self.quarantine,
                built.quarantine,
                self.source.quarantine_app_id,
                built.plan.seq,
                {META_STREAM: self.source.name, META_BATCH: built.plan.seq},
            )
        self._observe("quarantined", built.plan.seq, rows=built.quarantine.num_rows)

    def _check_order(self, seq: int, done: int | None) -> None:
        last = -1 if done is None else done
        if last < seq - 1:
            raise StreamStateError(
                f"table {self.table.uri} holds stream {self.source.name!r} only up to txn "
                f"version {done}, but the offset log has batches up to {seq - 1} finished: the "
                f"table lost commits (restored or recreated?); batch {seq} is not written"
            )

    def _succeed(self, claim: Claim, outcome: BatchOutcome) -> None:
        try:
            self.store.succeed(claim, outcome.as_result())
        except LeaseLost:
            # Our lease ran out and another ingester re-claimed the batch: it finds the txn
            # version and records the same outcome as reconciled.
            return
        self._observe("succeeded", outcome.seq, status=outcome.status)

    def _record_failure(self, claim: Claim, seq: int, error: Exception) -> None:
        try:
            status = self.store.fail(
                claim, error, retry_in_seconds=self.settings.retry_delay_seconds
            )
        except LeaseLost:
            return
        error.add_note(
            f"stream {self.source.name!r} batch {seq}: attempt {claim.attempts} "
            f"of {claim.max_attempts} recorded as {status}"
        )

    def _unclaimable(self, seq: int) -> Busy | None:
        tracker = self.store.get(self.source.scope, record_id(seq))
        if tracker is None:
            raise StreamStateError(f"stream {self.source.name!r} lost batch {seq} from its log")
        if tracker.status in DONE:
            return None
        if tracker.status in (Status.FAILED, Status.EXHAUSTED):
            raise StreamBlocked(blocked_message(self.source, seq, tracker))
        if tracker.status is Status.PENDING:
            return Busy(
                f"batch {seq} is not due before {_when(tracker.next_attempt_at)} "
                "(are the ingesters' clocks in sync?)"
            )
        return Busy(
            f"batch {seq} is held by {tracker.lease_owner} until {_when(tracker.lease_expires_at)}"
        )

    def _observe(self, step: str, seq: int, **detail: object) -> None:
        if self._observer is not None:
            self._observer(StreamStep(step, seq, detail))


def blocked_message(source: StreamSource, seq: int, tracker: Tracker) -> str:
    """Why a failed or exhausted batch stops the stream, and what a person can do."""
    head = (
        f"stream {source.name!r} is blocked at batch {seq}: attempt {tracker.attempts} of "
        f"{tracker.max_attempts} failed with: {tracker.last_error}"
    )
    if tracker.status is Status.EXHAUSTED:
        return (
            f"{head}. It used all its attempts: fix the cause and retry it (retry_batch), "
            "or set the bad files aside (set_aside_files); later batches wait for it"
        )
    return (
        f"{head}. The next attempt is due at {_when(tracker.next_attempt_at)}; later "
        "batches wait for it"
    )
