"""The outbox: deliver each record's side effect exactly once, tracked in the checkpoint.

Records are registered (durably) before anything is sent; a worker claims a batch
under a lease, sends each with its deterministic idempotency key, and settles it:
succeeded, failed (retried later with a backoff) or exhausted (a dead letter a person
can re-drive). A worker killed mid-batch leaves claimed records in_progress; once the
lease runs out another worker claims them and re-sends with the SAME key, which the
service answers with the original response instead of delivering again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from idem_assets.checkpoint import CheckpointStore, LeaseLost, Status
from idem_assets.faults import crash_point
from idem_assets.notify.client import DeliveryError, DeliveryResult


class Sender(Protocol):
    """What the outbox needs from a client."""

    def send(self, idempotency_key: str, payload: dict[str, Any]) -> DeliveryResult: ...


@dataclass(frozen=True)
class OutboxRecord:
    """One side effect to perform: its record id, idempotency key and payload."""

    record_id: str
    key: str
    payload: dict[str, Any]


@dataclass
class DeliveryReport:
    """What one outbox pass did."""

    registered: int = 0
    delivered: int = 0
    already_delivered: int = 0
    failed: int = 0
    exhausted: int = 0
    lease_lost: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def attempted(self) -> int:
        """Sends attempted in this pass."""
        return (
            self.delivered + self.already_delivered + self.failed + self.exhausted + self.lease_lost
        )


def register(
    store: CheckpointStore, scope: str, records: Sequence[OutboxRecord], *, max_attempts: int
) -> int:
    """Durably record what must be sent (existing records keep their first payload)."""
    return store.register(
        scope,
        [(r.record_id, {"key": r.key, "payload": r.payload}) for r in records],
        max_attempts=max_attempts,
    )


def drain(
    store: CheckpointStore,
    scope: str,
    sender: Sender,
    *,
    owner: str,
    lease_seconds: float,
    batch_size: int,
    retry_in_seconds: float | None = None,
    deadline_seconds: float | None = None,
) -> DeliveryReport:
    """Claim and send due records of ``scope`` until none are due (or the deadline passes)."""
    report = DeliveryReport()
    stop_at = None if deadline_seconds is None else time.monotonic() + deadline_seconds
    while stop_at is None or time.monotonic() < stop_at:
        claims = store.claim(scope, owner, lease_seconds=lease_seconds, limit=batch_size)
        if not claims:
            break
        for claim in claims:
            crash_point("outbox.before_send")
            payload = claim.payload or {}
            try:
                result = sender.send(str(payload["key"]), dict(payload["payload"]))
            except DeliveryError as error:
                status = _settle_failure(store, claim, error, retry_in_seconds, report)
                report.errors.append(
                    {
                        "record_id": claim.record_id,
                        "status": str(status),
                        "http_status": error.http_status,
                        "error": error.message,
                        "attempt": claim.attempts,
                    }
                )
                continue
            crash_point("outbox.sent_unsettled")
            try:
                store.succeed(
                    claim,
                    {
                        "status": result.status,
                        "http_status": result.http_status,
                        "response": result.body,
                    },
                )
            except LeaseLost:
                report.lease_lost += 1
                continue
            if result.status == "delivered":
                report.delivered += 1
            else:
                report.already_delivered += 1
    return report


def _settle_failure(
    store: CheckpointStore,
    claim: Any,
    error: DeliveryError,
    retry_in_seconds: float | None,
    report: DeliveryReport,
) -> Status | str:
    try:
        status = store.fail(
            claim, error, retry_in_seconds=retry_in_seconds, final=not error.retryable
        )
    except LeaseLost:
        report.lease_lost += 1
        return "lease_lost"
    if status == Status.EXHAUSTED:
        report.exhausted += 1
    else:
        report.failed += 1
    return status
