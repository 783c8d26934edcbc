"""Conversions between caller values and stored rows, with input checks that name the field."""

from __future__ import annotations

import json
import traceback as tb
from collections.abc import Iterable, Mapping
from typing import Any

from idem_assets.checkpoint.errors import CheckpointInputError
from idem_assets.checkpoint.model import (
    MAX_ERROR_CHARS,
    MAX_TRACEBACK_CHARS,
    Status,
    Tracker,
    bound_text,
    decode_json,
    encode_json,
    require_key,
)


def registration_rows(
    scope: str,
    records: Iterable[tuple[str, Mapping[str, Any] | None]],
    max_attempts: int,
    now: float,
) -> list[dict[str, Any]]:
    """Parameter rows for `register`; a record listed twice must carry the same payload."""
    seen: dict[str, str | None] = {}
    rows: list[dict[str, Any]] = []
    for index, item in enumerate(records):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise CheckpointInputError(
                f"records[{index}] for scope {scope!r} must be a (record_id, payload) pair, "
                f"got {type(item).__name__}"
            )
        record_id = require_key(f"records[{index}] record_id", item[0])
        payload = encode_json(f"payload of record {record_id!r}", item[1])
        if record_id in seen:
            if seen[record_id] != payload:
                raise CheckpointInputError(
                    f"record {record_id!r} appears twice in one register call for scope "
                    f"{scope!r} with different payloads"
                )
            continue
        seen[record_id] = payload
        rows.append(
            {
                "scope": scope,
                "record_id": record_id,
                "max_attempts": max_attempts,
                "now": now,
                "payload": payload,
            }
        )
    return rows


def error_texts(error: str | BaseException, traceback: str | None) -> tuple[str, str | None]:
    """Bounded (last_error, last_traceback); an exception brings its own traceback."""
    if isinstance(error, BaseException):
        if traceback is None and error.__traceback__ is not None:
            traceback = "".join(tb.format_exception(error))
        error = f"{type(error).__name__}: {error}"
    if not isinstance(error, str) or not error:
        raise CheckpointInputError(f"error must be a non-empty string or an exception: {error!r}")
    return (
        bound_text(error, MAX_ERROR_CHARS),
        bound_text(traceback, MAX_TRACEBACK_CHARS, keep_tail=True),
    )


def reason_text(reason: object) -> str:
    """A bounded, non-empty reason for ignoring a record."""
    if not isinstance(reason, str) or not reason.strip():
        raise CheckpointInputError(f"reason must be a non-empty string, got {reason!r}")
    return bound_text(reason, MAX_ERROR_CHARS) or reason


def key_list(field: str, values: Iterable[str]) -> list[str]:
    """Validated ids, as a list."""
    if isinstance(values, str):
        raise CheckpointInputError(f"{field} must be a collection of ids, not one string")
    return [require_key(f"{field}[{index}]", value) for index, value in enumerate(values)]


def ids_json(ids: list[str] | None) -> str | None:
    """The JSON array parameter behind `{json_array:...}` markers; None means no filter."""
    return None if ids is None else json.dumps(ids)


def status_value(value: Status | str) -> str:
    """A known status as its stored string."""
    try:
        return Status(value).value
    except ValueError:
        known = ", ".join(status.value for status in Status)
        raise CheckpointInputError(f"unknown status {value!r}; known: {known}") from None


def tracker_from_row(row: tuple[Any, ...]) -> Tracker:
    """A Tracker from a row in the column order of `sql.GET`."""
    (
        scope,
        record_id,
        status,
        attempts,
        max_attempts,
        redrive_count,
        owner,
        token,
        expires,
        next_at,
        created,
        updated,
        error,
        traceback,
        reason,
        payload,
        result,
    ) = row
    return Tracker(
        scope=scope,
        record_id=record_id,
        status=Status(status),
        attempts=attempts,
        max_attempts=max_attempts,
        redrive_count=redrive_count,
        lease_owner=owner,
        lease_token=token,
        lease_expires_at=expires,
        next_attempt_at=next_at,
        created_at=created,
        updated_at=updated,
        last_error=error,
        last_traceback=traceback,
        ignored_reason=reason,
        payload=decode_json(payload),
        result=decode_json(result),
    )
