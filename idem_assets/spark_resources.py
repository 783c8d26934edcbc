"""The Spark engine's settings as a dagster-pyspark resource: the Dagster side of ``spark/``.

``idem_assets.spark`` imports no Dagster, so Spark executors that run its hash UDF never
import it; the resource a Dagster run uses is built here (the ``spark`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping

from idem_assets._extras import require_extra

require_extra("dagster_pyspark", "spark")

from dagster_pyspark import LazyPySparkResource, PySparkResource  # noqa: E402
from dagster_pyspark.resources import spark_session_from_config  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from idem_assets.spark.resource import LOCAL_MASTER, prepared, spark_config  # noqa: E402


def pyspark_resource(
    master: str = LOCAL_MASTER, conf: Mapping[str, str] | None = None, *, lazy: bool = True
) -> PySparkResource | LazyPySparkResource:
    """A dagster-pyspark resource with this engine's settings.

    ``lazy`` (the default) starts the JVM only when a run touches ``spark_session``, so
    runs on the local engine pay nothing for having Spark configured.
    """
    config = spark_config(master, conf)
    if lazy:
        return LazyPySparkResource(spark_config=config)
    return PySparkResource(spark_config=config)


def session_of(resource: PySparkResource | LazyPySparkResource) -> SparkSession:
    """The resource's SparkSession (started on first use), checked for the required settings."""
    session = resource.spark_session
    if session is None:
        # A PySparkResource outside a Dagster run has not been set up yet.
        session = spark_session_from_config(resource.spark_config)
    return prepared(session)
