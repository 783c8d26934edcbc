"""The Spark engine: the lake's reads, dedupe and writes on Spark, committed by delta-rs.

Executors read landing files, deduplicate and write Parquet files into the table
location; the driver handles only metadata (file lists, footers, counts) and commits
each logical write as one Delta transaction through delta-rs. Results equal the local
engine's (same content fingerprints). See docs/spark.md.
"""

from idem_assets._extras import require_extra

require_extra("pyspark", "spark")

from idem_assets.lake.stored import table_fingerprint  # noqa: E402
from idem_assets.spark.fingerprint import spark_fingerprint  # noqa: E402
from idem_assets.spark.landing import SparkLandingBatch, read_landing_spark  # noqa: E402
from idem_assets.spark.merge import merge_partitions_spark  # noqa: E402
from idem_assets.spark.resource import (  # noqa: E402
    LOCAL_MASTER,
    local_spark_session,
    spark_config,
)
from idem_assets.spark.streaming import StreamSink, start_stream, with_dates_of_spark  # noqa: E402
from idem_assets.spark.transforms import SparkDedupe, dedupe_newest_spark  # noqa: E402
from idem_assets.spark.writer import append_spark, overwrite_partitions_spark  # noqa: E402

__all__ = [
    "LOCAL_MASTER",
    "SparkDedupe",
    "SparkLandingBatch",
    "StreamSink",
    "append_spark",
    "dedupe_newest_spark",
    "local_spark_session",
    "merge_partitions_spark",
    "overwrite_partitions_spark",
    "read_landing_spark",
    "spark_config",
    "spark_fingerprint",
    "start_stream",
    "table_fingerprint",
    "with_dates_of_spark",
]
