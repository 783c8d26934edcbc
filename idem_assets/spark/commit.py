"""The Spark engine's commit: the executors' staged files, in one Delta transaction.

Executors write Parquet into a staging folder of the table (``spark.staging.stage``); the
driver then commits those files through the one staged commit of the lake
(``lake.staging.commit_staged``): creating the table, replacing a date range, or adding
files (with the removes of a merge's rewritten partitions). Callers keep the staged folder
across their commit retries and discard it unless a commit took its files. Here: the
commit properties of the engine's writes, and the errors a failed Spark action raises.
"""

from __future__ import annotations

from deltalake import CommitProperties, Transaction
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.commits import Commit
from idem_assets.lake.fingerprint import Fingerprint

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)


def properties_for(
    commit: Commit, fingerprint: Fingerprint, txn: Transaction | None = None
) -> CommitProperties:
    """Commit properties: the commit's metadata and txn, the fingerprint of the staged
    files, the writer's own ``txn``, delta-rs retries off."""
    return commit.properties({"idem.fingerprint": str(fingerprint), "idem.engine": "spark"}, txn)
