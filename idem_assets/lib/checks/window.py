"""The day range a standalone check covers, read from the run it belongs to.

For a plain ``@asset_check`` of a partitioned asset that is not a lake asset (the
notifications' delivery checks): it is declared without partitions, so its result is the
asset's latest, and the window it checks comes from the run's partition tags (one
partition, or a backfill range); launched on its own it covers the asset's latest
materialized partition. Lake assets' checks are partitioned check specs evaluated per
partition in the asset's own step instead: see ``idem_assets.lib.checks.per_partition``.
"""

import dagster as dg

from idem_assets.io_manager import Window
from idem_assets.partitions import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG, window_dates


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
