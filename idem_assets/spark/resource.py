"""SparkSession settings for the Spark engine and a plain session with them (no Dagster).

The dagster-pyspark resource with the same settings is
``idem_assets.spark_resources.pyspark_resource``.

One place decides every setting that changes results: UTC session time zone, Parquet
timestamps as INT64 microseconds, proleptic Gregorian dates, ANSI mode. Only the master
and sizing knobs differ between a laptop (``local[2]``) and a cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

LOCAL_MASTER = "local[2]"
APP_NAME = "idem_assets"

# Settings the engine relies on for correctness; overriding them is refused.
REQUIRED_CONF: dict[str, str] = {
    # Timestamps are instants; UTC makes casts between TIMESTAMP_NTZ and TIMESTAMP exact
    # and makes to_date(event_time) the UTC day, as in the local engine.
    "spark.sql.session.timeZone": "UTC",
    # Delta and delta-rs expect INT64 microsecond timestamps; Spark's default is INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Arrow and delta-rs use the proleptic Gregorian calendar: never rebase old dates.
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
    # ANSI on: an overflow or a failed cast is an error, never a silent null. Code that
    # expects bad values (the landing reader) uses try_* functions and quarantines them.
    "spark.sql.ansi.enabled": "true",
}

# Sensible defaults for one machine; every key may be overridden.
DEFAULT_CONF: dict[str, str] = {
    "spark.app.name": APP_NAME,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.parquet.compression.codec": "snappy",
    # Staged Parquet folders need no _SUCCESS marker; only the Delta log says what is committed.
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

# A local master talks to itself only: keep the driver on loopback.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def spark_config(
    master: str = LOCAL_MASTER, conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The full Spark configuration for ``master``, with ``conf`` overriding the defaults."""
    overrides = {str(k): str(v) for k, v in (conf or {}).items()}
    clashes = {k: v for k, v in overrides.items() if k in REQUIRED_CONF and v != REQUIRED_CONF[k]}
    if clashes:
        required = {k: REQUIRED_CONF[k] for k in sorted(clashes)}
        raise ValueError(
            f"Spark settings must stay {required} (got {clashes}): the engine's results "
            "depend on them"
        )
    base = {**DEFAULT_CONF, **(LOCAL_CONF if master.startswith("local") else {})}
    return {**base, **overrides, **REQUIRED_CONF, "spark.master": master}


def local_spark_session(
    master: str = LOCAL_MASTER,
    conf: Mapping[str, str] | None = None,
    *,
    driver_memory: str | None = None,
) -> SparkSession:
    """A plain SparkSession with the engine's settings, for tests, benchmarks and scripts."""
    config = spark_config(
        master,
        {**(conf or {}), **({"spark.driver.memory": driver_memory} if driver_memory else {})},
    )
    builder = SparkSession.builder
    for key, value in config.items():
        builder = builder.config(key, value)
    return prepared(builder.getOrCreate())


def require_settings(spark: SparkSession) -> None:
    """Refuse a session whose result-relevant settings differ from REQUIRED_CONF."""
    wrong = {
        k: spark.conf.get(k, None)
        for k in REQUIRED_CONF
        if (spark.conf.get(k, None) or "").upper() != REQUIRED_CONF[k].upper()
    }
    if wrong:
        raise ValueError(
            f"SparkSession settings {wrong} differ from what the engine needs {REQUIRED_CONF}; "
            "build the session with idem_assets.spark.spark_config()"
        )


def prepared(spark: SparkSession) -> SparkSession:
    """Apply the runtime settings (log level, worker Python) and check the required ones."""
    require_settings(spark)
    context = spark.sparkContext
    context.setLogLevel("WARN")
    configured = context.getConf().get("spark.pyspark.python")
    if configured:
        # Executors' Python workers must import this project and its pinned libraries: the
        # interpreter the setting names (spark-submit's spark.pyspark.python) runs them.
        context.pythonExec = configured
    elif context.master.startswith("local") and context.pythonExec == "python3":
        # Local Python workers: the driver's interpreter unless PYSPARK_PYTHON chose another.
        context.pythonExec = sys.executable
    return spark
