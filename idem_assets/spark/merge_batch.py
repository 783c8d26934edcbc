"""What a Spark merge ranks against the stored rows, prepared once before its attempts.

Without a delete marker: the batch deduplicated with the local engine's ordering, and its
fingerprint. With one: every row as an event (``DELETE_FLAG`` set on deletes, the marker
column dropped), fingerprinted as received, and its deletes kept as tombstones beside the
table before anything is planned, as the local ``merge_with_deletes`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from idem_assets.lake.dedupe import DELETE_FLAG
from idem_assets.lake.fingerprint import Fingerprint
from idem_assets.lake.frames import conform
from idem_assets.lake.merge import Tombstones
from idem_assets.lake.tables import LakeTable
from idem_assets.spark.fingerprint import fingerprint_aggregates, fingerprint_of, hash_parts
from idem_assets.spark.schema import col, conform_spark
from idem_assets.spark.transforms import dedupe_newest_spark, survivor

__all__ = ["MergeBatch", "deduplicated_batch", "event_batch"]


@dataclass(frozen=True)
class MergeBatch:
    """A merge's batch: the rows to rank, and what the merge reports and prunes by."""

    rows: DataFrame  # the deduplicated batch, or (with deletes) every event, flagged
    schema: pa.Schema  # the table's (without the delete marker)
    fingerprint: Fingerprint
    touched: list[object] | None  # the batch's partition values; None: unpartitioned
    details: dict[str, Any]
    tombstones: Tombstones | None = None  # where deletes are kept, with a delete marker


def _partition_values(partition_column: str | None, where: Column) -> dict[str, Column]:
    if not partition_column:
        return {}
    value = col(partition_column)  # collect_set skips nulls: a null partition is flagged
    return {
        "values": F.collect_set(F.when(where, value)),
        "null": F.max(where & value.isNull()),
    }


def _touched(partition_column: str | None, found: Mapping[str, Any]) -> list[object] | None:
    if not partition_column:
        return None
    return [*found["values"], *([None] if found["null"] else [])]


def deduplicated_batch(
    df: DataFrame,
    key: Sequence[str],
    version_column: str,
    partition_column: str | None,
    schema: pa.Schema,
) -> MergeBatch:
    """The batch deduplicated with the local engine's ordering, fingerprinted as such."""
    # The batch's partitions come out of the dedupe's own job.
    deduped = dedupe_newest_spark(
        conform_spark(df, schema),
        key,
        version_column,
        fingerprint=True,
        extra_aggregates=_partition_values(partition_column, survivor()),
    )
    assert deduped.fingerprint is not None and deduped.extra is not None
    return MergeBatch(
        deduped.rows,
        schema,
        deduped.fingerprint,
        _touched(partition_column, deduped.extra),
        {
            "engine": "spark",
            "duplicates_dropped": deduped.duplicates_dropped,
            "conflicting_keys": deduped.conflicting_keys,
        },
    )


def event_batch(
    target: LakeTable,
    df: DataFrame,
    key: Sequence[str],
    version_column: str,
    partition_column: str | None,
    schema: pa.Schema,
    delete_column: tuple[str, object],
) -> MergeBatch:
    """Every row as an event; the batch's deletes (key and version, collected to the driver)
    are kept beside ``target`` now, before any planning."""
    column, marker = delete_column
    if column not in schema.names:
        raise ValueError(f"the delete column {column!r} is not in the schema {schema.names}")
    received = conform_spark(df, schema)
    stored = pa.schema([f for f in schema if f.name != column], metadata=schema.metadata)
    # A null marker is no delete.
    flag = F.coalesce(col(column) == F.lit(marker), F.lit(False)).alias(DELETE_FLAG)
    events = received.select(*(col(n) for n in stored.names), flag)
    # The fingerprint of the batch as received (marker included) and its partitions, in one job.
    found = received.agg(
        *fingerprint_aggregates(hash_parts(received.columns)),
        *(v.alias(k) for k, v in _partition_values(partition_column, F.lit(True)).items()),
    ).first()
    assert found is not None
    stones = Tombstones.beside(target, key, version_column)
    names = [*key, version_column]
    deletes = events.filter(F.col(DELETE_FLAG)).select(*(col(n) for n in names)).toArrow()
    stones.remember(conform(deletes, pa.schema([schema.field(n) for n in names])))
    return MergeBatch(
        events,
        stored,
        fingerprint_of(found),
        _touched(partition_column, found.asDict()),
        {"engine": "spark"},
        stones,
    )
