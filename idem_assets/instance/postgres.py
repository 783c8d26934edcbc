"""Dagster's PostgreSQL storage with its connections kept open in every process.

dagster-postgres holds a pool only in the webserver (``optimize_for_webserver``); a run
worker, the daemon and ``dg launch`` connect anew for every statement: a TCP connection and
a new server backend, about 3 ms each, three of them per stored check evaluation. This
storage gives every process the webserver's pool (one connection kept per storage, more
while threads overlap, recycled hourly):

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

from typing import Any

from dagster._serdes import ConfigurableClassData
from dagster_postgres.storage import DagsterPostgresStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config

# The webserver's defaults (dagster-webserver's --db-pool-recycle, --db-pool-max-overflow);
# no statement timeout: a run's writes are not the UI's reads.
POOL_RECYCLE_SECONDS = 3600
POOL_MAX_OVERFLOW = 8
NO_STATEMENT_TIMEOUT = 0


class PostgresStorage(DagsterPostgresStorage):
    """dagster-postgres's storage, each of its three storages holding a pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for storage in (self._run_storage, self._event_log_storage, self._schedule_storage):
            storage.optimize_for_webserver(
                statement_timeout=NO_STATEMENT_TIMEOUT,
                pool_recycle=POOL_RECYCLE_SECONDS,
                max_overflow=POOL_MAX_OVERFLOW,
            )

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
