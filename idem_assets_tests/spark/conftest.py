"""One local SparkSession for the whole Spark suite (starting a JVM costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from idem_assets.spark.resource import local_spark_session

# Any Spark action that ships more than this to the driver fails the job. Writes collect
# only file metadata and counts, so the whole suite runs under it; see test_writer.py.
DRIVER_RESULT_LIMIT = "8m"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] session with the engine's settings and a small driver result limit."""
    session = local_spark_session(
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.maxResultSize": DRIVER_RESULT_LIMIT,
        }
    )
    yield session
    session.stop()
