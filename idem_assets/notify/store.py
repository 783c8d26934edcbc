"""Durable idempotency-key store of the notification service (SQLite, WAL, synchronous=FULL)."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

COUNTERS = (
    "requests",
    "replays",
    "conflicts",
    "mismatches",
    "takeovers",
    "hangs",
    "injected_errors_before_delivery",
    "injected_errors_after_delivery",
    "unauthorized",
    "bad_requests",
)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS idempotency_keys (
        key TEXT PRIMARY KEY,
        payload_hash TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
        claim_id TEXT NOT NULL,
        claimed_at REAL NOT NULL,
        completed_at REAL,
        response_status INTEGER,
        response_body TEXT
    )""",
    # Append-only log of performed side effects: counted, never updated, so a second delivery
    # of a key would show up as a second row instead of being hidden by an upsert.
    """CREATE TABLE IF NOT EXISTS deliveries (
        delivery_id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        payload TEXT NOT NULL,
        delivered_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS deliveries_by_key ON deliveries (key)",
    "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)

ClaimKind = Literal["claimed", "taken_over", "replay", "in_flight", "mismatch"]


@dataclass(frozen=True)
class ClaimOutcome:
    """The result of presenting a key: proceed (claimed/taken_over) or answer from the store."""

    kind: ClaimKind
    claim_id: str | None = None
    response_status: int | None = None
    response_body: str | None = None


@dataclass(frozen=True)
class StoredResponse:
    """The response recorded with a delivery, replayed verbatim for later requests."""

    status: int
    body: str


class IdempotencyStore:
    """Idempotency keys, the delivery log and event counters in one SQLite file.

    Each operation opens its own connection, so request threads never share one, and takes
    the write lock up front (BEGIN IMMEDIATE) so check-then-write is one atomic step even
    when several server processes share the file. ``clock`` (epoch seconds, ``time.time``
    by default) stamps claims and deliveries and judges the in-flight timeout; tests pass
    one they move instead of waiting a timeout out.
    """

    def __init__(
        self,
        db_path: str | Path,
        in_flight_timeout_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if in_flight_timeout_seconds <= 0:
            raise ValueError(
                f"in_flight_timeout_seconds must be > 0, got {in_flight_timeout_seconds}"
            )
        self.db_path = Path(db_path)
        self.in_flight_timeout_seconds = in_flight_timeout_seconds
        self.clock = clock
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None)
        # FULL: a response the client has seen is on disk, even if the machine loses power.
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _bump(conn: sqlite3.Connection, counter: str) -> None:
        if counter not in COUNTERS:
            raise ValueError(f"unknown counter {counter!r}")
        conn.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + 1",
            (counter, 1),
        )

    def count(self, *counters: str) -> None:
        """Add one to each named durable event counter, in one transaction."""
        with self._write() as conn:
            for counter in counters:
                self._bump(conn, counter)

    def claim(self, key: str, payload_hash: str, now: float | None = None) -> ClaimOutcome:
        """Mark ``key`` in flight for this request, or say why the store answers instead."""
        now = self.clock() if now is None else now
        claim_id = uuid.uuid4().hex
        with self._write() as conn:
            self._bump(conn, "requests")
            row = conn.execute(
                "SELECT payload_hash, state, claimed_at, response_status, response_body "
                "FROM idempotency_keys WHERE key = ?",
                (key,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency_keys (key, payload_hash, state, claim_id, claimed_at)"
                    " VALUES (?, ?, 'in_flight', ?, ?)",
                    (key, payload_hash, claim_id, now),
                )
                return ClaimOutcome("claimed", claim_id=claim_id)
            stored_hash, state, claimed_at, status, body = row
            if stored_hash != payload_hash:
                self._bump(conn, "mismatches")
                return ClaimOutcome("mismatch")
            if state == "completed":
                self._bump(conn, "replays")
                return ClaimOutcome("replay", response_status=status, response_body=body)
            if now - claimed_at < self.in_flight_timeout_seconds:
                self._bump(conn, "conflicts")
                return ClaimOutcome("in_flight")
            # The holder has not finished within the timeout: treat it as crashed. Its
            # claim_id no longer matches, so it cannot complete after this takeover.
            conn.execute(
                "UPDATE idempotency_keys SET claim_id = ?, claimed_at = ? WHERE key = ?",
                (claim_id, now, key),
            )
            self._bump(conn, "takeovers")
            return ClaimOutcome("taken_over", claim_id=claim_id)

    def deliver(
        self, key: str, claim_id: str, payload_text: str, now: float | None = None
    ) -> StoredResponse | None:
        """Perform the delivery and store its response in one transaction.

        Returns None without delivering when the claim was lost to a takeover.
        """
        now = self.clock() if now is None else now
        with self._write() as conn:
            row = conn.execute(
                "SELECT 1 FROM idempotency_keys "
                "WHERE key = ? AND claim_id = ? AND state = 'in_flight'",
                (key, claim_id),
            ).fetchone()
            if row is None:
                return None
            cursor = conn.execute(
                "INSERT INTO deliveries (key, payload, delivered_at) VALUES (?, ?, ?)",
                (key, payload_text, now),
            )
            response = StoredResponse(201, _delivered_body(cursor.lastrowid, key, now))
            conn.execute(
                "UPDATE idempotency_keys SET state = 'completed', completed_at = ?, "
                "response_status = ?, response_body = ? WHERE key = ? AND claim_id = ?",
                (now, response.status, response.body, key, claim_id),
            )
            return response

    def release(self, key: str, claim_id: str) -> None:
        """Drop this request's in-flight marker after a failure that delivered nothing."""
        with self._write() as conn:
            conn.execute(
                "DELETE FROM idempotency_keys "
                "WHERE key = ? AND claim_id = ? AND state = 'in_flight'",
                (key, claim_id),
            )

    def stats(self) -> dict[str, int]:
        """Delivery totals, key states and every event counter."""
        with closing(self._connect()) as conn:
            deliveries, distinct = conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT key) FROM deliveries"
            ).fetchone()
            states = dict(
                conn.execute("SELECT state, COUNT(*) FROM idempotency_keys GROUP BY state")
            )
            counters = dict(conn.execute("SELECT name, value FROM counters"))
        result = {"deliveries": deliveries, "distinct_keys": distinct}
        result.update({name: int(counters.get(name, 0)) for name in COUNTERS})
        result["injected_errors"] = (
            result["injected_errors_before_delivery"] + result["injected_errors_after_delivery"]
        )
        result["in_flight"] = int(states.get("in_flight", 0))
        result["completed_keys"] = int(states.get("completed", 0))
        return result

    def delivery_counts(self, min_count: int = 1) -> list[dict[str, object]]:
        """Every delivered key with how often it was delivered (only >= ``min_count``)."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT key, COUNT(*), MIN(delivered_at), MAX(delivered_at) FROM deliveries "
                "GROUP BY key HAVING COUNT(*) >= ? ORDER BY key",
                (min_count,),
            ).fetchall()
        return [
            {"key": key, "count": n, "first_delivered_at": first, "last_delivered_at": last}
            for key, n, first, last in rows
        ]


def _delivered_body(delivery_id: int | None, key: str, delivered_at: float) -> str:
    """The JSON body of a 201, fixed at delivery time so replays return it byte for byte."""
    stamp = datetime.fromtimestamp(delivered_at, UTC).isoformat(timespec="microseconds")
    return json.dumps(
        {
            "notification_id": delivery_id,
            "idempotency_key": key,
            "status": "delivered",
            "delivered_at": stamp,
        },
        separators=(",", ":"),
    )
