"""Committing staged Spark files through delta-rs; the generic parts live in lake.staging."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import RemoveAction
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.append import already_committed
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.frames import nullable
from idem_assets.lake.result import WriteResult
from idem_assets.lake.staging import (
    DataFile,
    create_table,
    data_files,
    discard_unless_committed,
    file_location,
    next_version,
    require_plain_table,
    slice_fingerprint,
    stored_batches,
    table_fingerprint,
)
from idem_assets.lake.tables import LakeTable, commit_properties

__all__ = [
    "SPARK_ERRORS",
    "DataFile",
    "already_committed",
    "next_version",
    "create_table",
    "data_files",
    "discard_unless_committed",
    "file_location",
    "nullable",
    "properties_for",
    "removes",
    "require_plain_table",
    "skipped",
    "slice_fingerprint",
    "stored_batches",
    "table_fingerprint",
]

# What a failed Spark action raises on the driver.
SPARK_ERRORS = (CapturedException, Py4JJavaError)


def removes(files: Sequence[DataFile], partition_column: str | None) -> list[RemoveAction]:
    """Remove actions for the given files."""
    now = int(time.time() * 1000)
    return [RemoveAction(f.path, True, now, f.size,
                         {partition_column: None if f.partition_value is None
                          else str(f.partition_value)} if partition_column else {})
            for f in files]


def skipped(strategy: str, target: LakeTable, table: DeltaTable | None, fingerprint: Fingerprint,
            attempts: int, details: Mapping[str, Any]) -> WriteResult:
    """The result of a write that found nothing to commit."""
    version = table.version() if table is not None else -1
    return WriteResult(strategy, target.uri, version, False, 0, fingerprint, attempts=attempts,
                       details={"engine": "spark", **details})


def properties_for(metadata: Mapping[str, Any] | None, fingerprint: Fingerprint,
                   txn: Transaction | None) -> CommitProperties:
    """Commit properties: caller metadata, the fingerprint, the txn, delta-rs retries off."""
    return commit_properties({**(metadata or {}), "idem.fingerprint": str(fingerprint),
                              "idem.engine": "spark"}, [txn] if txn else [])
