"""What differs between SQLite and PostgreSQL: URLs, connections, transactions, SQL markers."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from idem_assets._extras import require_extra
from idem_assets.checkpoint.errors import CheckpointError, CheckpointInputError

if TYPE_CHECKING:
    # Imported where a PostgreSQL store connects (~60 ms a SQLite store never needs).
    import psycopg

    Connection: TypeAlias = sqlite3.Connection | psycopg.Connection[Any]

SQLITE_PREFIX = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql", "postgres")
BUSY_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10
# Any constant works; it only has to be the same for every process that opens a store.
_SCHEMA_LOCK_KEY = 0x1DE3C4EC

_NAMED_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_JSON_ARRAY = re.compile(r"\{json_array:([A-Za-z_]\w*)\}")


@dataclass(frozen=True)
class Dialect:
    """One backend's spelling of the store's SQL and its transaction discipline."""

    name: str
    # The LIMIT value meaning "no limit": SQLite rejects NULL there, PostgreSQL rejects -1.
    no_limit: int | None
    schema_lock: str | None
    # The database's own time in epoch seconds: every lease is judged by it.
    clock_query: str

    def render(self, statement: str) -> str:
        """Turn a statement from `sql` into this backend's text."""
        if self.name == "sqlite":
            statement = statement.replace("{skip_locked}", "")
            return _JSON_ARRAY.sub(r"json_each(:\1)", statement)
        statement = statement.replace("{skip_locked}", "FOR UPDATE SKIP LOCKED")
        statement = _JSON_ARRAY.sub(
            r"jsonb_array_elements_text(CAST(:\1 AS jsonb)) AS listed(value)", statement
        )
        return _NAMED_PARAMETER.sub(r"%(\1)s", statement.replace("%", "%%"))

    def transaction(self, conn: Connection) -> AbstractContextManager[None]:
        """A write transaction that is durable once the block exits without error."""
        if isinstance(conn, sqlite3.Connection):
            return _sqlite_transaction(conn)
        return conn.transaction()


SQLITE = Dialect(
    name="sqlite",
    no_limit=-1,
    schema_lock=None,
    # The operating system's clock, read by SQLite (not Python's time.time).
    clock_query="SELECT (julianday('now') - 2440587.5) * 86400.0",
)
POSTGRES = Dialect(
    name="postgresql",
    no_limit=None,
    # CREATE TABLE IF NOT EXISTS is not safe against a concurrent creator on PostgreSQL.
    schema_lock=f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK_KEY})",
    # The server's clock (clock_timestamp moves inside a transaction, now() does not).
    clock_query="SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS double precision)",
)


@contextmanager
def _sqlite_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock as the transaction begins, so what it reads is the latest
    # commit and its writes cannot fail with BUSY_SNAPSHOT, which busy_timeout does not retry.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def redact_url(url: str) -> str:
    """The URL with any password replaced, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def sqlite_path(url: str) -> Path:
    """The database file of a `sqlite:///relative.db` or `sqlite:////absolute.db` URL."""
    path = url[len(SQLITE_PREFIX) :]
    if not path or path == ":memory:" or path.startswith("file:"):
        raise CheckpointInputError(
            f"checkpoint url {url!r} must name a database file: an in-memory store is not durable"
        )
    if "?" in path:
        raise CheckpointInputError(f"checkpoint url {url!r}: query options are not supported")
    return Path(path)


def connect(url: str) -> tuple[Dialect, Connection]:
    """Open a connection for a checkpoint URL, configured for durable, concurrent use."""
    if not isinstance(url, str):
        raise CheckpointInputError(f"checkpoint url must be a string, got {type(url).__name__}")
    if url.startswith(SQLITE_PREFIX):
        return SQLITE, _connect_sqlite(sqlite_path(url))
    if urlsplit(url).scheme in POSTGRES_SCHEMES:
        return POSTGRES, _connect_postgres(url)
    raise CheckpointInputError(
        f"checkpoint url {redact_url(url)!r} must start with 'sqlite:///' or 'postgresql://'"
    )


def _connect_sqlite(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        mode = _switch_to_wal(conn)
        # FULL: a commit is on disk (WAL fsynced) before the call that made it returns.
        conn.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error as error:
        raise CheckpointError(f"cannot open checkpoint database {path}: {error}") from error
    if mode != "wal":
        conn.close()
        raise CheckpointError(f"checkpoint database {path} cannot use WAL (journal mode {mode})")
    return conn


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """Enable WAL (a persistent property of the file), waiting out a concurrent first open."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode == "wal":
            return mode
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as error:
            # The switch needs an exclusive lock and SQLite reports a conflict at once
            # instead of calling the busy handler, so the wait happens here.
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _connect_postgres(url: str) -> psycopg.Connection[Any]:
    require_extra("psycopg", "postgres")
    import psycopg  # here, not at import: see idem_assets._lazy

    try:
        # No server-side prepared statements: the optional filters (`:x IS NULL OR ...`)
        # need plans made for the actual values.
        return psycopg.connect(
            url, autocommit=True, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT_SECONDS
        )
    except psycopg.Error as error:
        message = str(error)
        password = urlsplit(url).password
        if password:
            message = message.replace(password, "***")
        raise CheckpointError(
            f"cannot connect to checkpoint database {redact_url(url)}: {message}"
        ) from None
