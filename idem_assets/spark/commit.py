"""The Spark engine's commit: the executors' staged files, in one Delta transaction.

Executors write Parquet into a staging folder of the table (``spark.staging.stage``); the
driver then commits those files through the one staged commit of the lake
(``lake.staging.commit_staged``): creating the table, replacing a date range, or adding
files (with the removes of a merge's rewritten partitions). Callers keep the staged folder
across their commit retries and discard it unless a commit took its files. Here: the
commit properties of the engine's writes, and the errors a failed Spark action raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deltalake import CommitProperties, Transaction
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.tables import commit_properties

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)


def properties_for(
    metadata: Mapping[str, Any] | None, fingerprint: Fingerprint, txn: Transaction | None
) -> CommitProperties:
    """Commit properties: caller metadata, the fingerprint, the txn, delta-rs retries off."""
    return commit_properties(
        {**(metadata or {}), "idem.fingerprint": str(fingerprint), "idem.engine": "spark"},
        [txn] if txn else [],
    )
