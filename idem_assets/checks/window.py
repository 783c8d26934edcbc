"""The window a check run covers."""

import dagster as dg

from idem_assets.io_manager import Window
from idem_assets.partitions import partition_dates


def check_window(
    context: dg.AssetCheckExecutionContext, partitions_def: dg.PartitionsDefinition | None
) -> Window:
    """The day range a check run covers (whole table when the asset is unpartitioned)."""
    if partitions_def is None:
        return Window()
    return Window(*partition_dates(context))
