"""Durable per-record trackers behind exactly-once side effects (no Dagster imports)."""

from idem_assets.checkpoint.errors import (
    CheckpointError,
    CheckpointInputError,
    InvalidTransition,
    LeaseLost,
    SchemaVersionError,
    UnknownRecord,
)
from idem_assets.checkpoint.model import (
    DEFAULT_MAX_ATTEMPTS,
    Claim,
    Memo,
    Retryable,
    Status,
    Tracker,
    backoff_seconds,
)
from idem_assets.checkpoint.store import CheckpointStore, open_store

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "CheckpointError",
    "CheckpointInputError",
    "CheckpointStore",
    "Claim",
    "InvalidTransition",
    "LeaseLost",
    "Memo",
    "Retryable",
    "SchemaVersionError",
    "Status",
    "Tracker",
    "UnknownRecord",
    "backoff_seconds",
    "open_store",
]
