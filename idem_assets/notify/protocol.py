"""The notification protocol: claim the key, apply faults, deliver once, answer or replay."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from idem_assets.notify.faults import FaultInjector, FaultPlan, Faults
from idem_assets.notify.keys import canonical_payload, payload_hash
from idem_assets.notify.store import IdempotencyStore

REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class Reply:
    """An HTTP answer; ``abort`` closes the connection without one, as a crashed server would."""

    status: int
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    abort: bool = False


def error_reply(status: int, error: str, message: str, **headers: str) -> Reply:
    """A JSON error body ``{"error": ..., "message": ...}``."""
    body = json.dumps({"error": error, "message": message}, separators=(",", ":"))
    return Reply(status, body, dict(headers))


class NotificationService:
    """Protocol logic behind ``POST /v1/notifications``: claim, fault, deliver, answer."""

    def __init__(
        self,
        store: IdempotencyStore,
        token: str,
        faults: Faults | None = None,
    ) -> None:
        if not token:
            raise ValueError("the notification service needs a non-empty bearer token")
        self.store = store
        self.injector = FaultInjector(faults)
        # Only a digest is kept: equal-length digests make the comparison constant-time
        # regardless of what the caller presents, and the token itself is not held around.
        self._token_digest = hashlib.sha256(token.encode("utf-8")).digest()
        self.stopping = threading.Event()

    def authorized(self, authorization: str | None) -> bool:
        """True when the Authorization header carries the service's bearer token."""
        scheme, _, presented = (authorization or "").partition(" ")
        digest = hashlib.sha256(presented.strip().encode("utf-8", "replace")).digest()
        token_ok = hmac.compare_digest(digest, self._token_digest)
        return scheme.lower() == "bearer" and token_ok

    def notify(self, key: str, payload: Any) -> Reply:
        """Handle one notification request whose auth, key and body are already validated."""
        plan = self.injector.plan(key)
        if plan.error_before:
            self.store.count("requests", "injected_errors_before_delivery")
            return error_reply(503, "injected_fault", "injected error before delivery")
        outcome = self.store.claim(key, payload_hash(payload))
        if outcome.kind == "mismatch":
            return error_reply(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was used with a different payload",
            )
        if outcome.kind == "replay":
            assert outcome.response_status is not None and outcome.response_body is not None
            return Reply(outcome.response_status, outcome.response_body, {REPLAYED_HEADER: "true"})
        if outcome.kind == "in_flight":
            return error_reply(
                409,
                "in_flight",
                "a request with this Idempotency-Key is in flight",
                **{"Retry-After": "1"},
            )
        assert outcome.claim_id is not None
        return self._deliver(key, outcome.claim_id, payload, plan)

    def _deliver(self, key: str, claim_id: str, payload: Any, plan: FaultPlan) -> Reply:
        try:
            if plan.delay_seconds:
                self.stopping.wait(plan.delay_seconds)
            if plan.hang_seconds:
                self.store.count("hangs")
                self.stopping.wait(plan.hang_seconds)
            self.injector.wait_released(self.stopping)
            if self.stopping.is_set():
                # Leave the marker in flight: after a stop mid-request the key looks exactly
                # as it would after a crash, and is taken over once the timeout passes.
                return Reply(0, abort=True)
            stored = self.store.deliver(key, claim_id, canonical_payload(payload))
        except BaseException:
            self.store.release(key, claim_id)
            raise
        if stored is None:
            self.store.count("conflicts")
            return error_reply(
                409, "claim_lost", "the in-flight marker was taken over by a later request"
            )
        if plan.error_after:
            self.store.count("injected_errors_after_delivery")
            return error_reply(502, "injected_fault", "injected error after delivery")
        return Reply(stored.status, stored.body)
