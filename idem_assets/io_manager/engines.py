"""The Spark engine's side of the IO manager: executors write, delta-rs commits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.lake import LakeTable, WriteResult


def is_spark_frame(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (checked without importing pyspark)."""
    return type(obj).__module__.startswith("pyspark.sql")


@dataclass(frozen=True)
class SparkWrite:
    """A Spark write's outcome and its deduplication counts."""

    result: WriteResult
    duplicates_dropped: int
    conflicting_keys: int


def write_spark(
    spec: WriteSpec,
    target: LakeTable,
    frame: Any,
    window: Window,
    schema: pa.Schema | None,
    commit_metadata: Mapping[str, Any],
) -> SparkWrite:
    """Write a Spark DataFrame with the spec's strategy; no partition reaches the driver."""
    from idem_assets.spark import (
        dedupe_newest_spark,
        merge_partitions_spark,
        overwrite_partitions_spark,
    )

    if schema is None:
        raise ValueError("a Spark output needs the table schema (TableOutput(schema=...))")
    if spec.strategy == "overwrite":
        if window.start is None or window.end is None or not spec.partition_column:
            raise ValueError("overwrite on Spark needs a partitioned asset")
        dropped = conflicts = 0
        if spec.dedupe and spec.natural_key:
            deduped = dedupe_newest_spark(frame, list(spec.natural_key), spec.version_column)
            frame, dropped, conflicts = (
                deduped.rows,
                deduped.duplicates_dropped,
                deduped.conflicting_keys,
            )
        result = overwrite_partitions_spark(
            target,
            frame,
            spec.partition_column,
            window.start,
            window.end,
            schema=schema,
            commit_metadata=commit_metadata,
            cluster_by=spec.natural_key,
        )
        return SparkWrite(result, dropped, conflicts)
    if spec.strategy == "merge":
        if not spec.version_column:
            raise ValueError("merge on Spark needs a version column")
        result = merge_partitions_spark(
            target,
            frame,
            list(spec.natural_key),
            spec.version_column,
            spec.partition_column,
            schema=schema,
            commit_metadata=commit_metadata,
        )
        details = result.details or {}
        return SparkWrite(
            result,
            int(details.get("duplicates_dropped", 0)),
            int(details.get("conflicting_keys", 0)),
        )
    raise ValueError(f"strategy {spec.strategy!r} runs on the local engine only")
