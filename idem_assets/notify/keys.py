"""Idempotency keys and payload hashes shared by the notification service and its client."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from decimal import Decimal
from typing import Any

MAX_KEY_LENGTH = 255
# Header-safe and log-safe: no spaces, quotes, control characters or path separators.
KEY_PATTERN = re.compile(rf"[A-Za-z0-9._:\-]{{1,{MAX_KEY_LENGTH}}}")

KeyPart = str | int | bool | Decimal | dt.date | dt.datetime | None


def key_problem(key: object) -> str | None:
    """Why ``key`` is not a valid Idempotency-Key, or None when it is valid."""
    if not isinstance(key, str) or not key:
        return "Idempotency-Key is required"
    if len(key) > MAX_KEY_LENGTH:
        return f"Idempotency-Key is {len(key)} characters long, the limit is {MAX_KEY_LENGTH}"
    if not KEY_PATTERN.fullmatch(key):
        return "Idempotency-Key may only contain letters, digits and . _ : -"
    return None


def _tagged(index: int, part: KeyPart) -> list[str]:
    """One key part as a [type tag, text] pair, so 1, "1" and True never collide."""
    if part is None:
        return ["none", ""]
    if isinstance(part, bool):
        return ["bool", "true" if part else "false"]
    if isinstance(part, int):
        return ["int", str(part)]
    if isinstance(part, str):
        return ["str", part]
    if isinstance(part, Decimal):
        if not part.is_finite():
            raise ValueError(f"idempotency key part {index}: {part} is not a finite decimal")
        return ["decimal", str(part.normalize())]
    if isinstance(part, dt.datetime):
        if part.tzinfo is None or part.utcoffset() is None:
            raise ValueError(
                f"idempotency key part {index}: naive datetime {part.isoformat()} is ambiguous, "
                "give it a UTC offset"
            )
        return ["datetime", part.astimezone(dt.UTC).isoformat()]
    if isinstance(part, dt.date):
        return ["date", part.isoformat()]
    raise TypeError(
        f"idempotency key part {index} has type {type(part).__name__}; "
        "use str, int, bool, Decimal, date, aware datetime or None"
    )


def idempotency_key(namespace: str, *parts: KeyPart) -> str:
    """A deterministic key (sha256 hex) for one side effect of one record: same input, same key.

    ``namespace`` names the kind of side effect (e.g. ``"orders.shipped.v1"``) so two effects of
    the same record get different keys. Parts are type-tagged and JSON-encoded before hashing,
    so ``("a:b", "c")`` and ``("a", "b:c")`` never collide. Floats are refused: their text form
    depends on how the value was computed, which would silently change the key.
    """
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("idempotency key namespace must be a non-empty string")
    encoded = json.dumps(
        [namespace, [_tagged(i, part) for i, part in enumerate(parts)]],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def canonical_payload(payload: Any) -> str:
    """The canonical JSON text of a payload: sorted keys, no spaces, no NaN/Infinity."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def payload_hash(payload: Any) -> str:
    """sha256 hex of the canonical payload: key order and whitespace do not change it."""
    return hashlib.sha256(canonical_payload(payload).encode("utf-8")).hexdigest()
