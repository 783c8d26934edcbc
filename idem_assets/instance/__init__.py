"""Dagster instance storages that keep their database connections open.

Dagster's SQLite and PostgreSQL storages open a new connection (and, for SQLite, build a new
engine with an empty statement cache) for every statement they run, so each event a run
stores costs several connections. A backfill that reports a check result per day and check
stores thousands of events: with the connections kept, each costs a statement on an open
one. Same tables, same statements, same files; configured in ``dagster.yaml``:

- ``idem_assets.instance.sqlite.SqliteStorage``: the embedded instance (``make run``);
- ``idem_assets.instance.postgres.PostgresStorage``: a team's instance (the ``postgres``
  extra; ``deploy/postgres/dagster.yaml``).

docs/deployment.md says which to use when, with what each costs per stored event.
"""
