"""Dagster's SQLite storage with its database connections kept open: the embedded instance.

Dagster's own SQLite storages build a new SQLAlchemy engine for every statement they run
(``poolclass=NullPool``): each stored event opens a connection to the run's database and
two to the index database, and compiles its statements afresh, because a new engine has an
empty statement cache. On a 2-core machine that is about 10 ms of CPU per stored asset
check result, most of a long backfill's time (``benchmarks/RESULTS.md``, "What Dagster
stores"). This storage is Dagster's, table for
table and statement for statement; it only keeps one engine per database file, so a stored
event costs a statement on an open connection:

    storage:
      custom:
        module: idem_assets.instance.sqlite
        class: SqliteStorage
        config:
          base_dir: {env: DAGSTER_HOME}

What else differs, and why it is safe:

- ``synchronous`` (default ``NORMAL``): with the write-ahead log Dagster already uses, a
  commit no longer waits for the disk; a crash of the process loses nothing, a power cut can
  lose the last commits before it (never corrupt the database). ``FULL`` restores Dagster's.
- The UI follows a running run by watching its database file; with a connection kept open,
  SQLite appends to the ``-wal`` file and seldom touches the database file itself, so the
  watch follows both files.
- Engines of run databases are kept for the few most recent runs (a UI that opens many
  runs holds a bounded number of files open) and are never shared with a forked child.

For a team with years of history and several processes writing at once, PostgreSQL
(``deploy/postgres/dagster.yaml``) is the instance to use: see docs/deployment.md.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as db
from dagster import _check as check
from dagster._config import Field, StringSource
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection, Engine
from watchdog.events import FileSystemEvent

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
DEFAULT_SYNCHRONOUS = "NORMAL"
# Run databases whose engines a process keeps at once (the index database's is always kept).
KEPT_RUN_ENGINES = 8

# Every kept engine, so that a forked child drops them (a SQLite connection must not cross a
# fork) without closing the parent's connections.
_ALL_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _forget_engines_in_child() -> None:
    for engine in list(_ALL_ENGINES):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_engines_in_child)


def kept_engine(conn_string: str, synchronous: str) -> Engine:
    """An engine that keeps its SQLite connections open, each set to ``synchronous``."""
    if synchronous not in SYNCHRONOUS:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {synchronous!r}"
        )
    engine = db.create_engine(
        conn_string,
        # One connection serves a process; a few more while threads overlap.
        pool_size=1,
        max_overflow=8,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
    )

    @db.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA synchronous={synchronous}")  # one of SYNCHRONOUS
        cursor.close()

    _ALL_ENGINES.add(engine)
    return engine


class _KeptConfig:
    """dagster.yaml's configuration of a kept storage: Dagster's ``base_dir``, and
    ``synchronous``."""

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {
            "base_dir": StringSource,
            "synchronous": Field(str, is_required=False, default_value=DEFAULT_SYNCHRONOUS),
        }

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Any) -> Any:
        os.makedirs(config_value["base_dir"], exist_ok=True)
        return cls(inst_data=inst_data, **config_value)


@contextmanager
def _transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        yield conn


class KeptSqliteEventLogStorage(_KeptConfig, SqliteEventLogStorage):
    """Dagster's SQLite event log, each database's engine kept (see the module docstring)."""

    def __init__(
        self,
        base_dir: str,
        inst_data: ConfigurableClassData | None = None,
        synchronous: str = DEFAULT_SYNCHRONOUS,
    ):
        self._synchronous = synchronous
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        self._tables: set[str] = set()
        super().__init__(base_dir, inst_data)

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = self._engines.pop(shard, None)
            if engine is None:
                engine = kept_engine(self.conn_string_for_shard(shard), self._synchronous)
            self._engines[shard] = engine  # the most recently used last
            runs = [name for name in self._engines if name != INDEX_SHARD_NAME]
            for name in runs[: max(0, len(runs) - KEPT_RUN_ENGINES)]:
                self._engines.pop(name).dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:  # type: ignore[override]
        # As Dagster's: one thread of a process at a time, the database made on first use.
        with self._db_lock:
            check.str_param(shard, "shard")
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with _transaction(engine) as conn:
                yield conn

    def has_table(self, table_name: str) -> bool:
        # Asked before every check evaluation is stored; a table, once there, stays.
        if table_name in self._tables:
            return True
        engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            found = bool(engine.dialect.has_table(conn, table_name))
        if found:
            self._tables.add(table_name)
        return found

    def watch(self, run_id: str, cursor: str | None, callback: Any) -> None:
        from watchdog.observers import Observer

        if not self._obs:
            self._obs = Observer()
            self._obs.start()
        watchdog = _RunLogWatchdog(self, run_id, callback, cursor)
        self._watchers[run_id][callback] = (
            watchdog,
            self._obs.schedule(watchdog, self._base_dir, recursive=True),
        )

    def _forget_engines(self) -> None:
        with self._engines_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()
        self._tables.clear()

    def wipe(self) -> None:
        self._forget_engines()  # the files are about to go
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        self._forget_engines()


class _RunLogWatchdog(SqliteEventLogStorageWatchdog):
    """Dagster's watch of a run's events, woken by its write-ahead log as well."""

    def __init__(self, storage: SqliteEventLogStorage, run_id: str, callback: Any, cursor: Any):
        super().__init__(storage, run_id, callback, cursor)
        path = storage.path_for_shard(run_id)
        self._patterns = [path, f"{path}-wal"]

    def on_modified(self, event: FileSystemEvent) -> None:
        self._process_log()


class _KeptEngine:
    """A SQLite storage built on one connection string, its engine kept (runs, schedules)."""

    _conn_string: str

    def __init__(
        self,
        conn_string: str,
        inst_data: ConfigurableClassData | None = None,
        synchronous: str = DEFAULT_SYNCHRONOUS,
    ):
        super().__init__(conn_string, inst_data)  # type: ignore[call-arg]
        self._kept = kept_engine(conn_string, synchronous)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with _transaction(self._kept) as conn:
            yield conn

    def dispose(self) -> None:
        super().dispose()  # type: ignore[misc]
        self._kept.dispose()


class KeptSqliteRunStorage(_KeptEngine, SqliteRunStorage):
    """Dagster's SQLite run storage with its engine kept."""


class KeptSqliteScheduleStorage(_KeptEngine, SqliteScheduleStorage):
    """Dagster's SQLite schedule storage with its engine kept."""


class SqliteStorage(_KeptConfig, DagsterSqliteStorage):
    """Dagster's SQLite storage (runs, events, schedules under ``base_dir``, the same files and
    tables), each database's engine kept open: ``storage: custom:`` in dagster.yaml."""

    def __init__(
        self,
        base_dir: str,
        inst_data: ConfigurableClassData | None = None,
        synchronous: str = DEFAULT_SYNCHRONOUS,
    ):
        self.base_dir = check.str_param(base_dir, "base_dir")
        # Dagster's own SQLite storages create the databases (and migrate them): made with
        # those, then handed an engine that stays.
        runs = SqliteRunStorage.from_local(_runs_directory(base_dir))
        schedules = SqliteScheduleStorage.from_local(_schedule_directory(base_dir))
        self._run_storage = KeptSqliteRunStorage(runs._conn_string, synchronous=synchronous)  # noqa: SLF001
        self._event_log_storage = KeptSqliteEventLogStorage(
            _event_logs_directory(base_dir), synchronous=synchronous
        )
        self._schedule_storage = KeptSqliteScheduleStorage(
            schedules._conn_string,  # noqa: SLF001
            synchronous=synchronous,
        )
        self._inst_data = check.opt_inst_param(inst_data, "inst_data", ConfigurableClassData)
        super(DagsterSqliteStorage, self).__init__()
