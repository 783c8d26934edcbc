"""Dagster's PostgreSQL storage with its connections kept open in every process.

dagster-postgres holds a pool only in the webserver (``optimize_for_webserver``); a run
worker, the daemon and ``dg launch`` connect anew for every statement: a TCP connection and
a new server backend, three of them per stored check evaluation. This storage gives every
process a pool like the webserver's (one connection kept per storage, more while threads
overlap, recycled hourly), whose connections are pinged before use: after a server restart
the next statement gets a new connection instead of the one the restart cut (a run's
failure must still reach the database: it frees the run's concurrency slots):

    storage:
      custom:
        module: idem_assets.instance.postgres
        class: PostgresStorage
        config:
          postgres_db: {hostname: ..., db_name: ..., username: ..., password: ...}

The configuration is dagster-postgres's own (``postgres_url`` or ``postgres_db``). A process
holds at most three connections while idle (runs, events, schedules), so ``max_connections``
must cover three per run worker, the daemon and the webserver.
"""

from __future__ import annotations

import functools
from typing import Any

from dagster._serdes import ConfigurableClassData
from dagster_postgres.event_log import PostgresEventLogStorage
from dagster_postgres.storage import DagsterPostgresStorage
from dagster_postgres.utils import (
    create_pg_engine,
    get_token_provider_from_config,
    pg_url_from_config,
)

# Like the webserver's pool (dagster-webserver's --db-pool-recycle); no statement timeout: a
# run's writes are not the UI's reads.
POOL_RECYCLE_SECONDS = 3600
POOL_MAX_OVERFLOW = 8


def _has_table(storage: PostgresEventLogStorage, table_name: str) -> bool:
    with storage._connect() as connection:
        return bool(storage._engine.dialect.has_table(connection, table_name))


class PostgresStorage(DagsterPostgresStorage):
    """dagster-postgres's storage, each of its three storages holding a pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for storage in (self._run_storage, self._event_log_storage, self._schedule_storage):
            # As optimize_for_webserver builds it (the URL's own options kept), pinged.
            options = storage._engine.url.query.get("options")
            storage._engine = create_pg_engine(
                storage.postgres_url,
                storage._token_provider,
                isolation_level="AUTOCOMMIT",
                pool_size=1,
                max_overflow=POOL_MAX_OVERFLOW,
                pool_recycle=POOL_RECYCLE_SECONDS,
                pool_pre_ping=True,
                **({"connect_args": {"options": options}} if options else {}),
            )
        # dagster-postgres before 0.29.2x asks has_table on a connection it never closes:
        # harmless without a pool, a lost pool slot with one (nine calls and every statement
        # waits for a slot). Asked here on a connection that goes back to the pool.
        events = self._event_log_storage
        events.has_table = functools.partial(_has_table, events)  # type: ignore[method-assign]

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> PostgresStorage:
        return cls(
            inst_data=inst_data,
            postgres_url=pg_url_from_config(config_value),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )
