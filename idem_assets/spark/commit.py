"""The Spark engine's commit: the executors' staged files, in one Delta transaction.

Executors write Parquet into a staging folder of the table (``spark.staging.stage``); the
driver then commits those files here, and only here, through the one log writer every
staged commit uses (``lake.delta_log.commit``): creating the table, replacing a date range,
or adding files (with the removes of a merge's rewritten partitions). Callers keep the
staged folder across their commit retries and discard it unless a commit took its files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import RemoveAction
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from idem_assets.lake.delta_log import commit
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.staging import StagedWrite, commit_overwrite
from idem_assets.lake.tables import LakeTable, commit_properties, table_schema

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


def commit_staged(
    target: LakeTable,
    table: DeltaTable | None,
    staged: StagedWrite,
    properties: CommitProperties,
    *,
    schema: pa.Schema,
    replace_range: tuple[dt.date, dt.date] | None = None,
    removes: Sequence[RemoveAction] = (),
) -> int:
    """Commit ``staged`` in one transaction; the version it made.

    With no table, the commit creates it with ``schema``. ``replace_range`` ``(start, end)``
    makes the staged files the whole content of those date partitions; otherwise they are
    added, with ``removes`` taken out in the same commit. A concurrent commit makes it fail
    (delta-rs's retries are off): the caller decides again.
    """
    if replace_range is not None:
        start, end = replace_range
        return commit_overwrite(target, table, staged, schema, start, end, properties)
    return commit(
        target,
        table,
        staged.add_actions(),
        properties,
        schema=schema if table is None else table_schema(table),
        partition_column=staged.partition_column,
        removes=removes,
    )
