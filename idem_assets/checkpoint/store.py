"""The durable tracker store: one implementation over SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from idem_assets.checkpoint import sql
from idem_assets.checkpoint.dialect import Dialect, connect, redact_url
from idem_assets.checkpoint.errors import (
    CheckpointError,
    CheckpointInputError,
    InvalidTransition,
    LeaseLost,
    SchemaVersionError,
    UnknownRecord,
)
from idem_assets.checkpoint.leases import Clock, DatabaseClock
from idem_assets.checkpoint.model import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_OWNER_CHARS,
    Claim,
    Memo,
    Retryable,
    Status,
    Tracker,
    backoff_seconds,
    decode_json,
    encode_json,
    require_count,
    require_key,
    require_seconds,
)
from idem_assets.checkpoint.records import (
    error_texts,
    ids_json,
    key_list,
    reason_text,
    registration_rows,
    status_value,
    tracker_from_row,
)

if TYPE_CHECKING:
    from idem_assets.checkpoint.dialect import Connection


def open_store(url: str, *, clock: Clock | None = None) -> CheckpointStore:
    """Open (creating the schema if needed) the store at `sqlite:///path.db` or `postgresql://...`.

    Leases are judged by the database's clock (`DatabaseClock`). `clock` replaces it with
    any function returning epoch seconds (tests use it to move time).
    """
    dialect, conn = connect(url)
    store = CheckpointStore(conn, dialect, redact_url(url), clock)
    try:
        store.ensure_schema()
    except BaseException:
        store.close()
        raise
    return store


class CheckpointStore:
    """Per-record trackers with leases, attempts and dead letters; every change is committed."""

    def __init__(
        self, conn: Connection, dialect: Dialect, display_url: str, clock: Clock | None = None
    ) -> None:
        self._conn: Connection | None = conn
        self._dialect = dialect
        self._rendered: dict[str, str] = {}
        self._clock = clock if clock is not None else DatabaseClock(self._database_seconds)
        self.url = display_url
        self.backend = dialect.name

    def __repr__(self) -> str:
        return f"CheckpointStore({self.url!r})"

    def __enter__(self) -> CheckpointStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def ensure_schema(self) -> None:
        """Create the tables once, upgrade an older schema in place; refuse a newer one."""
        with self._transaction():
            if self._dialect.schema_lock:
                self._run(self._dialect.schema_lock, {})
            self._run(sql.CREATE_VERSION_TABLE, {})
            version = self._run(sql.SELECT_VERSION, {}).fetchone()[0]
            if version is None:
                for statement in sql.CREATE_SCHEMA:
                    self._run(statement, {})
                self._run(sql.INSERT_VERSION, {"version": sql.SCHEMA_VERSION, "now": self._now()})
            elif version > sql.SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.url} holds checkpoint schema version {version}; this code knows "
                    f"up to {sql.SCHEMA_VERSION}: upgrade the code before using this store"
                )
            elif version < sql.SCHEMA_VERSION:
                for step in range(version + 1, sql.SCHEMA_VERSION + 1):
                    for statement in sql.MIGRATIONS[step]:
                        self._run(statement, {})
                self._run(sql.INSERT_VERSION, {"version": sql.SCHEMA_VERSION, "now": self._now()})

    def register(
        self,
        scope: str,
        records: Iterable[tuple[str, Mapping[str, Any] | None]],
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> int:
        """Add a pending tracker per new record; existing trackers are never changed.

        Returns how many trackers were new. All records are added in one transaction.
        """
        require_key("scope", scope)
        require_count("max_attempts", max_attempts)
        now = self._now()
        rows = registration_rows(scope, records, max_attempts, now)
        if not rows:
            return 0
        with self._transaction():
            cursor = self._connection().cursor()
            cursor.executemany(self._sql(sql.REGISTER), rows)
            return int(cursor.rowcount)

    def claim(
        self,
        scope: str,
        owner: str,
        *,
        lease_seconds: float,
        limit: int | None = None,
        record_ids: Iterable[str] | None = None,
    ) -> list[Claim]:
        """Lease up to `limit` due records of `scope` to `owner`, counting one attempt each.

        Due means pending, failed past its backoff, or in_progress past its lease. A due record
        that already used its last attempt is moved to exhausted instead. Two callers never
        get the same record. With `record_ids`, only those records are considered.
        """
        require_key("scope", scope)
        require_key("owner", owner, MAX_OWNER_CHARS)
        lease = require_seconds("lease_seconds", lease_seconds, positive=True)
        now = self._now()
        params: dict[str, Any] = {
            "scope": scope,
            "owner": owner,
            "token": uuid.uuid4().hex,
            "now": now,
            "expires": now + lease,
            "limit": self._dialect.no_limit if limit is None else require_count("limit", limit),
        }
        statement = sql.CLAIM_DUE
        if record_ids is not None:
            ids = key_list("record_ids", record_ids)
            if not ids:
                return []
            params["record_ids"] = ids_json(ids)
            statement = sql.CLAIM_LISTED
        with self._transaction():
            rows = self._run(statement, params).fetchall()
        claims = [
            Claim(
                scope=scope,
                record_id=record_id,
                owner=owner,
                lease_token=params["token"],
                attempts=attempts,
                max_attempts=max_attempts,
                lease_expires_at=expires,
                payload=decode_json(payload),
            )
            for record_id, status, attempts, max_attempts, expires, payload in rows
            if status == Status.IN_PROGRESS
        ]
        return sorted(claims, key=lambda claim: claim.record_id)

    def extend(self, claim: Claim, lease_seconds: float) -> Claim:
        """Heartbeat: push the lease to now + `lease_seconds`; LeaseLost if it is not ours."""
        lease = require_seconds("lease_seconds", lease_seconds, positive=True)
        now = self._now()
        if not self._change_held(sql.EXTEND, claim, now, expires=now + lease):
            raise self._lease_lost(claim)
        return dataclasses.replace(claim, lease_expires_at=now + lease)

    def succeed(self, claim: Claim, result: Mapping[str, Any] | None = None) -> None:
        """Mark the record succeeded (with a small JSON result); LeaseLost if not ours."""
        encoded = encode_json(f"result of record {claim.record_id!r}", result)
        if self._change_held(sql.SUCCEED, claim, self._now(), result=encoded):
            return
        current = self.get(claim.scope, claim.record_id)
        if not _finished_by(current, claim, {Status.SUCCEEDED}):
            raise self._lease_lost(claim, current)

    def fail(
        self,
        claim: Claim,
        error: str | BaseException,
        traceback: str | None = None,
        *,
        retry_in_seconds: float | None = None,
        final: bool = False,
    ) -> Status:
        """Record a failed attempt: failed (retry after a backoff) or exhausted at max_attempts.

        `error` may be an exception (its type, message and traceback are kept). Without
        `retry_in_seconds` the backoff doubles per attempt (see `backoff_seconds`). A
        `final` error (one no retry can fix) exhausts the record straight away.
        """
        delay = (
            backoff_seconds(claim.attempts)
            if retry_in_seconds is None
            else require_seconds("retry_in_seconds", retry_in_seconds, positive=False)
        )
        error_text, traceback_text = error_texts(error, traceback)
        now = self._now()
        params = self._held_params(claim, now)
        params.update(
            retry_at=now + delay, error=error_text, traceback=traceback_text, final=bool(final)
        )
        with self._transaction():
            row = self._run(sql.FAIL, params).fetchone()
        if row is not None:
            return Status(row[0])
        current = self.get(claim.scope, claim.record_id)
        if current is not None and _finished_by(current, claim, {Status.FAILED, Status.EXHAUSTED}):
            return current.status
        raise self._lease_lost(claim, current)

    def release(self, claim: Claim) -> None:
        """Give the record back as pending; the attempt its claim counted is undone."""
        if self._change_held(sql.RELEASE, claim, self._now()):
            return
        current = self.get(claim.scope, claim.record_id)
        if not _finished_by(current, claim, {Status.PENDING}):
            raise self._lease_lost(claim, current)

    def ignore(self, scope: str, record_id: str, reason: str) -> None:
        """Decide a record needs nothing (refused under a live lease or after success)."""
        params = {
            "scope": require_key("scope", scope),
            "record_id": require_key("record_id", record_id),
            "reason": reason_text(reason),
            "now": self._now(),
        }
        with self._transaction():
            changed = self._run(sql.IGNORE, params).rowcount
        if changed:
            return
        current = self.get(scope, record_id)
        if current is None:
            raise UnknownRecord(scope, record_id)
        raise InvalidTransition(
            f"record {record_id!r} in scope {scope!r} is {current.status} and cannot be ignored: "
            "only pending, failed, exhausted or in_progress records with an expired lease can"
        )

    def redrive(self, scope: str | None = None, record_ids: Iterable[str] | None = None) -> int:
        """Move exhausted records back to pending with attempts reset; returns how many moved."""
        if record_ids is not None and scope is None:
            raise CheckpointInputError("redrive: record_ids need a scope")
        ids = None if record_ids is None else key_list("record_ids", record_ids)
        if ids == []:
            return 0
        params = {
            "scope": None if scope is None else require_key("scope", scope),
            "record_ids": ids_json(ids),
            "now": self._now(),
        }
        with self._transaction():
            return int(self._run(sql.REDRIVE, params).rowcount)

    def get(self, scope: str, record_id: str) -> Tracker | None:
        """The tracker of one record, or None if it was never registered."""
        row = self._run(sql.GET, {"scope": scope, "record_id": record_id}).fetchone()
        return None if row is None else tracker_from_row(row)

    def list(
        self,
        scope: str | None = None,
        statuses: Iterable[Status | str] | None = None,
        prefix: str | None = None,
    ) -> list[Tracker]:
        """Trackers, optionally of one scope, some statuses and a record-id prefix, in order."""
        wanted = None if statuses is None else [status_value(value) for value in statuses]
        if wanted == []:
            return []
        params = {"scope": scope, "statuses": ids_json(wanted), "prefix": prefix}
        return [tracker_from_row(row) for row in self._run(sql.LIST, params).fetchall()]

    def counts(self, scope: str) -> dict[str, int]:
        """Number of trackers per status in `scope`, every status present (zeros included)."""
        found = dict(self._run(sql.COUNTS, {"scope": scope}).fetchall())
        return {status.value: int(found.get(status.value, 0)) for status in Status}

    def dead_letters(self, scope: str | None = None) -> list[Tracker]:
        """Exhausted trackers: what a person has to look at and possibly re-drive."""
        return self.list(scope, [Status.EXHAUSTED])

    def retryable(self, now: float | None = None) -> list[Retryable]:
        """Scopes with failed records past their backoff or in_progress ones past their lease."""
        at = self._now() if now is None else require_seconds("now", now, positive=False)
        rows = self._run(sql.RETRYABLE, {"now": at}).fetchall()
        return [Retryable(scope, float(due)) for scope, due in rows]

    def memos(self, scope: str, keys: Iterable[str]) -> dict[str, Memo]:
        """The memos of ``keys`` in ``scope`` that exist (stamps are compared by the caller)."""
        wanted = key_list("keys", keys)
        if not wanted:
            return {}
        params = {"scope": require_key("scope", scope), "keys": ids_json(wanted)}
        rows = self._run(sql.GET_MEMOS, params).fetchall()
        return {key: Memo(key, stamp, decode_json(memo)) for key, stamp, memo in rows}

    def memos_in(self, scope: str) -> dict[str, Memo]:
        """Every memo of ``scope``, by key."""
        rows = self._run(sql.SCOPE_MEMOS, {"scope": require_key("scope", scope)}).fetchall()
        return {key: Memo(key, stamp, decode_json(memo)) for key, stamp, memo in rows}

    def remember(self, scope: str, memos: Iterable[Memo]) -> int:
        """Keep each memo (replacing the key's earlier one), all in one transaction."""
        now = self._now()
        rows = [
            {
                "scope": require_key("scope", scope),
                "memo_key": require_key("memo key", memo.key),
                "stamp": require_key("memo stamp", memo.stamp),
                "memo": encode_json(f"memo {memo.key!r}", memo.value),
                "now": now,
            }
            for memo in memos
        ]
        if rows:
            with self._transaction():
                self._connection().cursor().executemany(self._sql(sql.PUT_MEMO), rows)
        return len(rows)

    def remember_if(self, scope: str, memo: Memo, expected: Memo | None) -> bool:
        """Compare-and-set one memo: keep ``memo`` only if the key holds no memo (``expected``
        None) or still holds exactly ``expected`` (same stamp, same value); True if it did.

        Values are compared as the JSON text ``encode_json`` writes (keys sorted), so a value
        read back from ``memos`` is "exactly" itself, and ``1`` is not ``true``.
        """
        params = {
            "scope": require_key("scope", scope),
            "memo_key": require_key("memo key", memo.key),
            "stamp": require_key("memo stamp", memo.stamp),
            "memo": encode_json(f"memo {memo.key!r}", memo.value),
            "now": self._now(),
        }
        statement = sql.INSERT_MEMO_IF_ABSENT
        if expected is not None:
            if expected.key != memo.key:
                raise CheckpointInputError(
                    f"remember_if: expected memo {expected.key!r} is not memo {memo.key!r}"
                )
            params["expected_stamp"] = expected.stamp
            params["expected_memo"] = encode_json(f"expected memo {memo.key!r}", expected.value)
            statement = sql.REPLACE_MEMO_IF_UNCHANGED
        with self._transaction():
            return bool(self._run(statement, params).rowcount)

    def forget(self, scope: str, keys: Iterable[str]) -> int:
        """Drop the memos of ``keys`` in ``scope``; returns how many there were."""
        wanted = key_list("keys", keys)
        if not wanted:
            return 0
        params = {"scope": require_key("scope", scope), "keys": ids_json(wanted)}
        with self._transaction():
            return int(self._run(sql.FORGET_MEMOS, params).rowcount)

    def now(self) -> float:
        """Epoch seconds on this store's clock (leases are compared against it)."""
        return self._now()

    def _now(self) -> float:
        return float(self._clock())

    def _database_seconds(self) -> float:
        row = self._connection().execute(self._dialect.clock_query).fetchone()
        return float(row[0])

    def _connection(self) -> Connection:
        if self._conn is None:
            raise CheckpointError(f"{self!r} is closed")
        return self._conn

    def _sql(self, statement: str) -> str:
        rendered = self._rendered.get(statement)
        if rendered is None:
            rendered = self._rendered[statement] = self._dialect.render(statement)
        return rendered

    def _run(self, statement: str, params: Mapping[str, Any]) -> Any:
        return self._connection().execute(self._sql(statement), params)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._dialect.transaction(self._connection()):
            yield

    def _held_params(self, claim: Claim, now: float) -> dict[str, Any]:
        return {
            "scope": claim.scope,
            "record_id": claim.record_id,
            "token": claim.lease_token,
            "now": now,
        }

    def _change_held(self, statement: str, claim: Claim, now: float, **values: Any) -> bool:
        """Apply a change only while `claim` still holds the lease (compare-and-set on token)."""
        params = self._held_params(claim, now) | values
        with self._transaction():
            return bool(self._run(statement, params).rowcount)

    def _lease_lost(self, claim: Claim, current: Tracker | None = None) -> LeaseLost:
        current = current or self.get(claim.scope, claim.record_id)
        if current is None:
            held = "the tracker no longer exists"
        elif current.status is Status.IN_PROGRESS and current.lease_token != claim.lease_token:
            held = f"re-claimed by {current.lease_owner!r} for attempt {current.attempts}"
        else:
            held = f"the record is {current.status} (last held by {current.lease_owner!r})"
        return LeaseLost(claim.scope, claim.record_id, claim.lease_token, held)


def _finished_by(current: Tracker | None, claim: Claim, statuses: set[Status]) -> bool:
    """True if `claim` itself already made this change: repeating it is a no-op."""
    return (
        current is not None
        and current.lease_token == claim.lease_token
        and current.status in statuses
    )
