"""Commit properties of the Spark engine's writes; the log itself is lake.delta_log."""

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
