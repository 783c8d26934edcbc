"""Resources: the landing zone, the lake, the checkpoint store, the notification service.

This is the one place the project's settings are read from the environment, at run time
(never at import), each name a constant below: ``IDEM_LANDING_DIR`` and ``IDEM_LAKE_DIR``
(``LakeResource``), ``IDEM_STATE_URL`` (``CheckpointResource``), ``IDEM_NOTIFY_URL`` and
``IDEM_NOTIFY_TOKEN`` (``NotificationResource``; the token only as a ``dg.EnvVar``, see
``NotificationResource.from_environment``), and any ``dg.EnvVar`` given as an S3 setting
(``storage_option_values``). Left unset, S3 credentials are delta-rs's own ``AWS_*``.

Three variables are read elsewhere, where this Dagster module cannot or should not be:

- ``IDEM_NOTIFY_TOKEN`` (``idem_assets.notify.NOTIFY_TOKEN_ENV``, the name imported here)
  by ``idem_assets.notify.__main__``: the reference notification server is a standalone,
  Dagster-free process with its own command line.
- ``IDEM_CRASH_AT`` and ``IDEM_CRASH_ONCE`` (``idem_assets.faults.CRASH_ENV`` /
  ``CRASH_ONCE_ENV``), with ``IDEM_FAIL_AT`` / ``IDEM_FAIL_ONCE`` and ``IDEM_DELAY_AT``, by
  ``idem_assets.faults``: test-only fault injection, called inside the Dagster-free lake,
  notify and Spark layers (on executors too) and read at each call so a parent arms each
  child.
- ``DAGSTER_HOME`` (``idem_assets.cli.main.DAGSTER_HOME_ENV``) by
  ``idem_assets.cli.main``: Dagster's own convention for where its instance lives; the
  command only asks whether it is set, to record results there instead of in a temporary
  instance (``dg.DagsterInstance.get()`` then reads it itself).

The Dagster instance profiles (``dagster.yaml``, ``deploy/postgres/dagster.yaml``) name
their own variables, which Dagster reads.
"""

import hashlib
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from idem_assets._deltalake_config import S3Config
from idem_assets.checkpoint import CheckpointStore, open_store
from idem_assets.checkpoint.leases import Clock
from idem_assets.lake import LakeTable
from idem_assets.landing.store import SETTLE_SECONDS, LandingRoot, is_object_uri, landing_root
from idem_assets.notify import NOTIFY_TOKEN_ENV
from idem_assets.notify.client import NotificationClient

LANDING_DIR_ENV = "IDEM_LANDING_DIR"
LAKE_DIR_ENV = "IDEM_LAKE_DIR"
DEFAULT_LANDING_DIR = "data/landing"
DEFAULT_LAKE_DIR = "data/lake"


class LakeResource(dg.ConfigurableResource):
    """Locations of the raw landing files and of the Delta tables built from them.

    Left unset, each location comes from its environment variable at run time
    (``IDEM_LANDING_DIR`` / ``IDEM_LAKE_DIR``), else from the default under ``./data``.
    Either may be a local path or an object-storage URI (``s3://bucket/prefix``); both
    reach object storage with the same settings (``s3`` / ``storage_options``, else the
    standard ``AWS_*`` variables).
    """

    landing_dir: str | None = Field(
        default=None,
        description="Root of the landing zone: a local path or s3://bucket/prefix (gs://, "
        "az:// too); <landing>/<source>/date=YYYY-MM-DD/*. "
        f"Defaults to ${LANDING_DIR_ENV} or {DEFAULT_LANDING_DIR}.",
    )
    lake_dir: str | None = Field(
        default=None,
        description="Root under which each Delta table lives at <lake>/<table>. "
        f"Defaults to ${LAKE_DIR_ENV} or {DEFAULT_LAKE_DIR}.",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Extra delta-rs storage options for object stores (e.g. allow_http); "
        "they override the s3 settings. No secrets here: use s3 with dg.EnvVar.",
    )
    s3: S3Config | None = Field(
        default=None,
        description="S3 or S3-compatible store for an s3:// lake_dir or landing_dir "
        "(dagster-deltalake S3Config): pass credentials as dg.EnvVar. Left unset, the "
        "standard AWS_* environment variables are read.",
    )
    reuse_file_hashes: bool = Field(
        default=True,
        description="Prove landing files unchanged by their stamp (size, mtime, ctime, inode) "
        "when an earlier run hashed them, instead of reading every byte again. Turn off for "
        "file systems whose ctime does not move on writes (some FUSE mounts).",
    )
    file_settle_seconds: float = Field(
        default=SETTLE_SECONDS,
        ge=0,
        description="A local landing file changed less than this many seconds before it was "
        "hashed is hashed again next time: a write within the same clock tick may not move "
        "its stamp. Raise it for file systems with coarse timestamps.",
    )

    @property
    def landing_uri(self) -> str:
        """The landing root as configured: an absolute local path or an object-store URI."""
        value = self.landing_dir or dg.EnvVar(LANDING_DIR_ENV).get_value(DEFAULT_LANDING_DIR)
        assert value is not None
        if is_object_uri(value):
            return value.rstrip("/")
        return str(Path(value.removeprefix("file://")).resolve())

    def landing(self) -> LandingRoot:
        """The landing root, with the lake's object-store settings (one per operation)."""
        if self.landing_dir:
            where = "LakeResource.landing_dir"
        elif dg.EnvVar(LANDING_DIR_ENV).get_value():
            where = LANDING_DIR_ENV
        else:
            where = f"{LANDING_DIR_ENV} (unset: the default {DEFAULT_LANDING_DIR})"
        uri = self.landing_uri
        options = self.resolved_storage_options() if is_object_uri(uri) else None
        return landing_root(uri, options, where)

    @property
    def lake_root(self) -> str:
        """Resolved lake root (a local path or an object-store URI)."""
        value = self.lake_dir or dg.EnvVar(LAKE_DIR_ENV).get_value(DEFAULT_LAKE_DIR)
        assert value is not None
        if "://" in value:
            return value.rstrip("/")
        return str(Path(value).resolve())

    def table(self, name: str) -> LakeTable:
        """The Delta table called ``name`` under the lake root."""
        if not name or any(part in ("", ".", "..") for part in name.split("/")):
            raise ValueError(f"invalid table name {name!r}")
        return LakeTable(f"{self.lake_root}/{name}", self.resolved_storage_options())

    def resolved_storage_options(self) -> dict[str, str]:
        """delta-rs storage options: the s3 settings overlaid by ``storage_options``.

        Outside a Dagster run the fields may still hold ``dg.EnvVar`` objects; they are
        read here, and a missing one is named (never its value).
        """
        return storage_option_values(self.s3, self.storage_options)


def storage_option_values(*configs: object) -> dict[str, str]:
    """delta-rs storage options from dagster-deltalake config objects and plain mappings.

    Later configs override earlier ones. ``dg.EnvVar`` values are read here (outside a run
    they are still unresolved); a missing one is named, never its value.
    """
    settings: dict[str, object] = {}
    for config in configs:
        if config is None:
            continue
        # Not S3Config.str_dict(): str() of an unresolved dg.EnvVar raises by design.
        values = dict(config)  # type: ignore[call-overload]
        values.pop("provider", None)  # dagster-deltalake's tag, not a delta-rs option
        settings.update(values)
    return {key: _env_value(key, value) for key, value in settings.items() if value is not None}


def _env_value(option: str, value: object) -> str:
    """The value of a storage option, reading it from the environment if it is a dg.EnvVar."""
    if not isinstance(value, dg.EnvVar):
        return str(value)
    resolved = value.get_value()
    if resolved is None:
        raise ValueError(
            f"storage option {option!r}: environment variable {value.env_var_name} is not set"
        )
    return resolved


STATE_URL_ENV = "IDEM_STATE_URL"
DEFAULT_STATE_URL = "sqlite:///data/state/checkpoint.db"
STATE_FOLDER = "_idem_state"


class CheckpointResource(dg.ConfigurableResource):
    """The durable checkpoint store (SQLite by default, PostgreSQL for several workers).

    Left unset, the URL comes from ``IDEM_STATE_URL`` at run time, else a SQLite file
    under ``./data/state``. Pass a PostgreSQL URL with a password through ``dg.EnvVar``.
    """

    url: str | None = Field(
        default=None,
        description="sqlite:///path.db or postgresql://user@host:port/db. "
        f"Defaults to ${STATE_URL_ENV} or {DEFAULT_STATE_URL}.",
    )

    @property
    def resolved_url(self) -> str:
        """The store URL this resource opens."""
        value = self.url or dg.EnvVar(STATE_URL_ENV).get_value(DEFAULT_STATE_URL)
        assert value is not None
        return value

    def open(self) -> CheckpointStore:
        """Open the store (use as a context manager; it closes its connection)."""
        return open_store(self.resolved_url, clock=self.clock())

    def clock(self) -> Clock | None:
        """The clock leases and backoffs are judged by; None: the database's own (the default).

        Each store ``open`` returns runs on it, for the runs that set leases and backoffs
        and for ``notification_retry_sensor`` deciding which are over. A subclass may return
        another function of epoch seconds: tests move time with one instead of sleeping
        until a lease or a backoff runs out.
        """
        return None

    @classmethod
    def beside(cls, root_uri: str) -> "CheckpointResource":
        """The store for tables under ``root_uri`` when none is configured.

        ``IDEM_STATE_URL`` when set; else SQLite in ``<root>/_idem_state/`` for a local root
        (Delta readers skip ``_``-prefixed folders), or, for object storage, SQLite in this
        machine's cache folder (``~/.cache/idem_assets/<root hash>/``): fine for one
        machine, while several machines need a shared PostgreSQL URL.
        """
        configured = dg.EnvVar(STATE_URL_ENV).get_value()
        if configured:
            return cls(url=configured)
        local = root_uri.removeprefix("file://")
        if "://" not in local:
            return cls(url=f"sqlite:///{Path(local).resolve() / STATE_FOLDER / 'checkpoint.db'}")
        digest = hashlib.sha256(root_uri.encode()).hexdigest()[:16]
        folder = Path.home() / ".cache" / "idem_assets" / digest
        return cls(url=f"sqlite:///{folder / 'checkpoint.db'}")


NOTIFY_URL_ENV = "IDEM_NOTIFY_URL"
DEFAULT_NOTIFY_URL = "http://127.0.0.1:8765"


class NotificationResource(dg.ConfigurableResource):
    """The notification HTTP API; the bearer token comes in through ``dg.EnvVar`` only."""

    base_url: str | None = Field(
        default=None,
        description=f"Service base URL. Defaults to ${NOTIFY_URL_ENV} or {DEFAULT_NOTIFY_URL}.",
    )
    token: str = Field(
        description=f"Bearer token, e.g. dg.EnvVar('{NOTIFY_TOKEN_ENV}'). Never logged."
    )
    timeout_seconds: float = Field(default=5.0, description="Per-request timeout.")
    max_retries: int = Field(
        default=3, description="Retries inside one attempt (5xx, timeouts, 409 in flight)."
    )
    backoff_seconds: float = Field(default=0.2, description="First retry backoff, doubled.")

    @classmethod
    def from_environment(cls) -> "NotificationResource":
        """The resource whose token is ``$IDEM_NOTIFY_TOKEN``, read at run time."""
        return cls(token=dg.EnvVar(NOTIFY_TOKEN_ENV))

    @property
    def resolved_url(self) -> str:
        """The service base URL."""
        value = self.base_url or dg.EnvVar(NOTIFY_URL_ENV).get_value(DEFAULT_NOTIFY_URL)
        assert value is not None
        return value

    def client(self) -> NotificationClient:
        """A client for the service."""
        return NotificationClient(
            self.resolved_url,
            self.token,
            timeout_seconds=self.timeout_seconds,
            max_retries=self.max_retries,
            backoff_seconds=self.backoff_seconds,
        )


class SparkResource(dg.ConfigurableResource):
    """The Spark engine's session: local mode by default, any ``spark.master`` by config.

    Nothing starts until a run selects ``engine: spark``; pyspark is only imported then,
    so the code location loads without it. The session is built through
    dagster-pyspark's ``PySparkResource`` with the engine's required settings (UTC,
    microsecond Parquet timestamps, ANSI mode); see docs/spark.md.
    """

    master: str = Field(
        default="local[2]",
        description="spark.master: local[N] on one machine, or a cluster URL (spark://, yarn, "
        "k8s://) where executors have this package installed.",
    )
    conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark settings (spark.executor.memory, …)."
    )

    def session(self) -> Any:
        """The SparkSession (started on first use)."""
        from idem_assets.spark_resources import pyspark_resource, session_of

        return session_of(pyspark_resource(self.master, self.conf, lazy=True))
