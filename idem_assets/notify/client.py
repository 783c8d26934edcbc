"""Client of the notification service: bounded retries, and never a delivery it cannot confirm."""

from __future__ import annotations

import http.client
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from idem_assets.notify.keys import canonical_payload, key_problem

__all__ = ["DeliveryError", "DeliveryResult", "NotificationClient"]

logger = logging.getLogger(__name__)

NOTIFICATIONS_PATH = "/v1/notifications"
MAX_RESPONSE_BYTES = 1024 * 1024
# 408/425/429 and every 5xx mean "not handled now, try again"; any other 4xx is final.
_RETRYABLE_4XX = frozenset({408, 409, 425, 429})
_FINAL_REASONS = {
    400: "the service rejected the request as malformed",
    401: "the service rejected the bearer token",
    403: "the service refused access",
    413: "the payload is larger than the service accepts",
    422: "the payload changed under the same idempotency key (a bug to fix, not to retry)",
}


@dataclass(frozen=True)
class DeliveryResult:
    """A delivery the service confirmed: new (``delivered``) or replayed (``already_delivered``)."""

    key: str
    status: Literal["delivered", "already_delivered"]
    http_status: int
    body: dict[str, Any]
    attempts: int


class DeliveryError(Exception):
    """A request to the service that did not succeed; ``retryable`` says whether to try later."""

    def __init__(
        self, message: str, retryable: bool, http_status: int | None = None, *, key: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.http_status = http_status
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the error intact when it crosses a process boundary (multiprocess executors).
        return (_rebuild_delivery_error, (self.message, self.retryable, self.http_status, self.key))


def _rebuild_delivery_error(
    message: str, retryable: bool, http_status: int | None, key: str
) -> DeliveryError:
    return DeliveryError(message, retryable, http_status, key=key)


class NotificationClient:
    """Sends notifications with an Idempotency-Key; retries only what is safe and useful."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_seconds: float = 5.0,
        max_retries: int = 3,
        backoff_seconds: float = 0.2,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"notification base_url must be http(s)://host[:port], got {base_url!r}"
            )
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("notification base_url must not carry credentials, query or fragment")
        # Checked here because http.client echoes an invalid header value in its error message.
        if not token or any(not 0x21 <= ord(ch) <= 0x7E for ch in token):
            raise ValueError("notification token must be non-empty printable ASCII without spaces")
        if timeout_seconds <= 0 or max_retries < 0 or backoff_seconds < 0:
            raise ValueError("timeout_seconds must be > 0, max_retries and backoff_seconds >= 0")
        if max_backoff_seconds < backoff_seconds:
            raise ValueError("max_backoff_seconds must be >= backoff_seconds")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds

    def __repr__(self) -> str:
        return f"NotificationClient({self._where('')!r})"

    def send(self, idempotency_key: str, payload: Any) -> DeliveryResult:
        """Deliver ``payload`` once under ``idempotency_key``, retrying transient failures.

        Raises DeliveryError: retryable for 5xx, timeouts, connection errors and a key still in
        flight elsewhere after the last retry; final for 400, 401 and 422.
        """
        key = idempotency_key
        problem = key_problem(key)
        if problem is not None:
            raise DeliveryError(f"cannot send notification: {problem}", False, key=str(key)[:80])
        try:
            body = canonical_payload(payload).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise DeliveryError(
                f"payload for key {key} is not JSON-serialisable: {exc}", False, key=key
            ) from None
        attempts = self.max_retries + 1
        last: DeliveryError | None = None
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            try:
                status, headers, raw = self._request(
                    "POST",
                    NOTIFICATIONS_PATH,
                    body,
                    {"Idempotency-Key": key, "Content-Type": "application/json"},
                )
            except (OSError, http.client.HTTPException) as exc:
                last = DeliveryError(
                    f"POST {self._where(NOTIFICATIONS_PATH)} key {key}: "
                    f"{self._redact(f'{type(exc).__name__}: {exc}')}",
                    True,
                    None,
                    key=key,
                )
            else:
                if 200 <= status < 300:
                    replayed = headers.get("idempotent-replayed", "").lower() == "true"
                    return DeliveryResult(
                        key,
                        "already_delivered" if replayed else "delivered",
                        status,
                        _json_body(raw),
                        attempt,
                    )
                last = self._status_error(key, status, raw)
                if not last.retryable:
                    raise last
                retry_after = _retry_after_seconds(headers.get("retry-after"))
            if attempt < attempts:
                delay = self._backoff(attempt, retry_after)
                logger.warning(
                    "notification key=%s attempt %d/%d failed (%s); retrying in %.2fs",
                    key,
                    attempt,
                    attempts,
                    last.http_status or "no response",
                    delay,
                )
                time.sleep(delay)
        assert last is not None
        raise DeliveryError(
            f"not confirmed after {attempts} attempt(s): {last.message}",
            True,
            last.http_status,
            key=key,
        )

    def stats(self) -> dict[str, Any]:
        """The service's counters (``GET /v1/stats``)."""
        return self._get_json("/v1/stats")

    def delivery_counts(self, min_count: int = 1) -> dict[str, int]:
        """Delivered keys and how often each was delivered (``GET /v1/deliveries``)."""
        listing = self._get_json(f"/v1/deliveries?min_count={int(min_count)}")
        return {row["key"]: int(row["count"]) for row in listing["deliveries"]}

    def set_faults(self, **faults: float | int) -> dict[str, Any]:
        """Change the injected faults (``POST /v1/admin/faults``); returns the faults in force."""
        body = json.dumps(faults).encode("utf-8")
        return self._call_json("POST", "/v1/admin/faults", body)["faults"]

    def _get_json(self, path: str) -> dict[str, Any]:
        return self._call_json("GET", path, None)

    def _call_json(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        """One request without retries: for reading stats and admin calls."""
        try:
            status, _, raw = self._request(method, path, body, {"Content-Type": "application/json"})
        except (OSError, http.client.HTTPException) as exc:
            message = self._redact(f"{type(exc).__name__}: {exc}")
            raise DeliveryError(f"{method} {self._where(path)}: {message}", True) from None
        if status != 200:
            raise self._status_error("", status, raw, f"{method} {self._where(path)}")
        return _json_body(raw)

    def _request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        connection_class = (
            http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        )
        conn = connection_class(self._host, self._port, timeout=self.timeout_seconds)
        try:
            conn.request(
                method,
                self._prefix + path,
                body=body,
                headers={**headers, "Authorization": f"Bearer {self._token}"},
            )
            response = conn.getresponse()
            raw = response.read(MAX_RESPONSE_BYTES)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, raw
        finally:
            conn.close()

    def _status_error(
        self, key: str, status: int, raw: bytes, what: str | None = None
    ) -> DeliveryError:
        what = what or f"POST {self._where(NOTIFICATIONS_PATH)} key {key}"
        detail = self._redact(_server_message(raw))
        if status == 409:
            reason = "in flight in another request, not confirmed delivered"
        elif status >= 500 or status in _RETRYABLE_4XX:
            reason = "transient failure"
        else:
            reason = _FINAL_REASONS.get(status, "unexpected status")
        retryable = status >= 500 or status in _RETRYABLE_4XX
        message = f"{what}: HTTP {status}, {reason}: {detail}"
        return DeliveryError(message, retryable, status, key=key)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter, honouring Retry-After up to the cap."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * 2 ** (attempt - 1))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_seconds))
        return delay

    def _where(self, path: str) -> str:
        scheme = "https" if self._https else "http"
        return f"{scheme}://{self._host}:{self._port}{self._prefix}{path}"

    def _redact(self, text: str) -> str:
        """Removes the token from text taken from the network or the OS before it is raised."""
        return text.replace(self._token, "[redacted]")


def _json_body(raw: bytes) -> dict[str, Any]:
    """The response body as a JSON object; other content is kept under ``raw``, not dropped."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"raw": raw.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"raw": value}


def _server_message(raw: bytes) -> str:
    body = _json_body(raw)
    text = body.get("message") or body.get("error") or body.get("raw") or ""
    return str(text)[:200]


def _retry_after_seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
