"""Comparing a Spark landing read with the local reader's read of the same files.

Both engines run the same reader on every file, so they agree exactly: rows, quarantine
rows with their reasons, row numbers and raw records, files, notes and dropped columns.
"""

from __future__ import annotations

from typing import Any

from idem_assets.lake import fingerprint
from idem_assets.lake.frames import nullable
from idem_assets.landing import LandingBatch
from idem_assets.spark.fingerprint import spark_fingerprint
from idem_assets.spark.landing import SparkLandingBatch


def _quarantine_key(row: dict[str, Any]) -> tuple:
    return (row["source_file"], row["row_number"], row["reason"], row["raw_record"])


def assert_same_read(batch: SparkLandingBatch, local: LandingBatch) -> list[dict[str, Any]]:
    """Spark's read equals the local one in every respect; returns Spark's quarantine rows."""
    assert batch.counts() == (local.rows.num_rows, local.quarantine.num_rows)
    assert spark_fingerprint(batch.rows) == fingerprint(local.rows)
    rows = batch.rows.toArrow()
    assert rows.schema == nullable(local.rows.schema)
    assert fingerprint(rows) == fingerprint(local.rows)
    quarantine = [r.asDict() for r in batch.quarantine.collect()]
    assert sorted(quarantine, key=_quarantine_key) == sorted(
        local.quarantine.to_pylist(), key=_quarantine_key
    )
    assert batch.files == tuple(f.relpath for f in local.files)
    assert batch.dropped_columns == local.dropped_columns
    assert batch.notes == local.notes
    assert batch.ignored_files == local.ignored_files
    return quarantine
