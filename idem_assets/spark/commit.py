"""Committing staged Spark files through delta-rs; the generic parts live in lake.staging."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from deltalake import CommitProperties, Transaction
from deltalake.transaction import RemoveAction
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.stored import DataFile
from idem_assets.lake.tables import commit_properties

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)


def removes(files: Sequence[DataFile], partition_column: str | None) -> list[RemoveAction]:
    """Remove actions for the given files."""
    now = int(time.time() * 1000)
    return [
        RemoveAction(
            f.path,
            True,
            now,
            f.size,
            {partition_column: None if f.partition_value is None else str(f.partition_value)}
            if partition_column
            else {},
        )
        for f in files
    ]


def properties_for(
    metadata: Mapping[str, Any] | None, fingerprint: Fingerprint, txn: Transaction | None
) -> CommitProperties:
    """Commit properties: caller metadata, the fingerprint, the txn, delta-rs retries off."""
    return commit_properties(
        {**(metadata or {}), "idem.fingerprint": str(fingerprint), "idem.engine": "spark"},
        [txn] if txn else [],
    )
