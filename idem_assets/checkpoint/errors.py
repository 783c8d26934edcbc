"""Errors raised by the checkpoint store."""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class for checkpoint store errors."""


class CheckpointInputError(CheckpointError, ValueError):
    """An argument is malformed: the message names the field and the problem."""


class UnknownRecord(CheckpointError, LookupError):
    """No tracker exists for this (scope, record_id)."""

    def __init__(self, scope: str, record_id: str) -> None:
        super().__init__(f"no tracker for record {record_id!r} in scope {scope!r}")
        self.scope = scope
        self.record_id = record_id


class InvalidTransition(CheckpointError):
    """The tracker's current status does not allow the requested change."""


class LeaseLost(CheckpointError):
    """The claim's lease is no longer held: another worker re-claimed or the record moved on."""

    def __init__(self, scope: str, record_id: str, lease_token: str, now_held: str) -> None:
        super().__init__(
            f"lease {lease_token} on record {record_id!r} in scope {scope!r} is lost: {now_held}"
        )
        self.scope = scope
        self.record_id = record_id
        self.lease_token = lease_token


class SchemaVersionError(CheckpointError):
    """The database holds a checkpoint schema newer than this code understands."""
