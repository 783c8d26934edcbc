"""The day range a check run covers, read from the run it belongs to.

Checks are declared without a partitions definition: Dagster 1.13 cannot attribute a
single-run backfill's check results to partitions (the UI would list them as skipped),
whereas an unpartitioned check's result is the asset's latest, whatever the run covered.
The window comes from the run's partition tags — one partition, or a backfill range —
and a check launched on its own covers the asset's latest materialized partition.
"""

import dagster as dg

from idem_assets.io_manager import Window
from idem_assets.partitions import window_dates

PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


class NothingToCheckError(RuntimeError):
    """A partitioned asset's check ran before any partition was materialized."""


def check_window(
    context: dg.AssetCheckExecutionContext,
    partitions_def: dg.PartitionsDefinition | None,
    asset_key: dg.AssetKey | None = None,
) -> Window:
    """The day range a check run covers (whole table when the asset is unpartitioned)."""
    if partitions_def is None:
        return Window()
    assert isinstance(partitions_def, dg.TimeWindowPartitionsDefinition)
    tags = context.run.tags
    if RANGE_START_TAG in tags and RANGE_END_TAG in tags:
        first, last = tags[RANGE_START_TAG], tags[RANGE_END_TAG]
    elif PARTITION_TAG in tags:
        first = last = tags[PARTITION_TAG]
    else:
        first = last = _latest_partition(context, asset_key)
    start = partitions_def.time_window_for_partition_key(first).start
    end = partitions_def.time_window_for_partition_key(last).end
    return Window(*window_dates(dg.TimeWindow(start, end)))


def _latest_partition(context: dg.AssetCheckExecutionContext, asset_key: dg.AssetKey | None) -> str:
    key = asset_key or context.check_specs[0].asset_key
    event = context.instance.get_latest_materialization_event(key)
    partition = (
        event.asset_materialization.partition if event and event.asset_materialization else None
    )
    if partition is None:
        raise NothingToCheckError(
            f"{key.to_user_string()} has no materialized partition yet: materialize one, or "
            "run the check together with its asset"
        )
    return partition
