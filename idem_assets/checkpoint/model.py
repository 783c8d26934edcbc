"""Tracker model: statuses, the records handed out by the store, and input limits."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from idem_assets.checkpoint.errors import CheckpointInputError

MAX_KEY_CHARS = 512
MAX_OWNER_CHARS = 200
MAX_JSON_BYTES = 64 * 1024
MAX_ERROR_CHARS = 4 * 1024
MAX_TRACEBACK_CHARS = 32 * 1024
DEFAULT_MAX_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 30.0
BACKOFF_MAX_SECONDS = 3600.0


class Status(StrEnum):
    """Where a record stands; succeeded, exhausted and ignored are terminal until a re-drive."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    FAILED = "failed"
    EXHAUSTED = "exhausted"
    SUCCEEDED = "succeeded"
    IGNORED = "ignored"


@dataclass(frozen=True)
class Tracker:
    """The durable state of one record in one scope.

    `lease_owner`/`lease_token` name the worker that holds (in_progress) or last held the
    record; `lease_expires_at` is set only while in_progress. `next_attempt_at` is the
    earliest time a claim may take the record (lease expiry while in_progress, backoff
    while failed) and is None in terminal statuses. Times are epoch seconds.
    """

    scope: str
    record_id: str
    status: Status
    attempts: int
    max_attempts: int
    redrive_count: int
    lease_owner: str | None
    lease_token: str | None
    lease_expires_at: float | None
    next_attempt_at: float | None
    created_at: float
    updated_at: float
    last_error: str | None
    last_traceback: str | None
    ignored_reason: str | None
    payload: Any
    result: Any


@dataclass(frozen=True)
class Claim:
    """A lease on one record: proof that this worker may act on it now."""

    scope: str
    record_id: str
    owner: str
    lease_token: str
    attempts: int
    max_attempts: int
    lease_expires_at: float
    payload: Any

    @property
    def is_last_attempt(self) -> bool:
        """True when a failure of this attempt exhausts the record."""
        return self.attempts >= self.max_attempts


@dataclass(frozen=True)
class Memo:
    """A value kept while its stamp holds: a file's hash while its size and time hold, a
    check's result while what it read is unchanged. The caller compares stamps."""

    key: str
    stamp: str
    value: Any


class Retryable(NamedTuple):
    """A scope with records due for another attempt, and the earliest due time."""

    scope: str
    next_attempt_at: float


def backoff_seconds(
    attempts: int, base: float = BACKOFF_BASE_SECONDS, cap: float = BACKOFF_MAX_SECONDS
) -> float:
    """Exponential backoff after the given attempt number: base, 2*base, 4*base ... up to cap."""
    return min(cap, base * 2.0 ** max(0, attempts - 1))


def require_key(field: str, value: object, limit: int = MAX_KEY_CHARS) -> str:
    """A non-empty string of bounded length (scope, record_id, owner)."""
    if not isinstance(value, str) or not value:
        raise CheckpointInputError(f"{field} must be a non-empty string, got {value!r}")
    if len(value) > limit:
        raise CheckpointInputError(f"{field} is {len(value)} characters; the limit is {limit}")
    return value


def require_seconds(field: str, value: object, *, positive: bool) -> float:
    """A finite number of seconds, strictly positive or non-negative."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CheckpointInputError(f"{field} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise CheckpointInputError(f"{field} must be {bound} seconds, got {value!r}")
    return float(value)


def require_count(field: str, value: object, minimum: int = 1) -> int:
    """An integer at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckpointInputError(f"{field} must be an integer >= {minimum}, got {value!r}")
    return value


def encode_json(field: str, value: Any) -> str | None:
    """Small JSON text for payload/result columns; None stays NULL."""
    if value is None:
        return None
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise CheckpointInputError(f"{field} is not JSON-serialisable: {error}") from None
    size = len(text.encode("utf-8"))
    if size > MAX_JSON_BYTES:
        raise CheckpointInputError(
            f"{field} is {size} bytes as JSON; the limit is {MAX_JSON_BYTES} (keep it small, "
            "store large data elsewhere and reference it)"
        )
    return text


def decode_json(text: str | None) -> Any:
    """Inverse of encode_json."""
    return None if text is None else json.loads(text)


def bound_text(text: str | None, limit: int, *, keep_tail: bool = False) -> str | None:
    """Cut text to `limit` characters, saying how much was dropped."""
    if text is None or len(text) <= limit:
        return text
    dropped = len(text) - limit
    marker = f"[...{dropped} characters cut...]"
    keep = max(0, limit - len(marker))
    return marker + text[-keep:] if keep_tail else text[:keep] + marker
