"""The resources a code location with lake assets needs, built in one place for every environment.

A project that declares its own sources merges them into its definitions::

    dg.Definitions.merge(dg.load_from_defs_folder(path_within_project=HERE),
                         dg.Definitions(resources=default_resources()))
"""

from __future__ import annotations

from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.lib.asset_def import LAKE_IO_MANAGER_KEY
from idem_assets.resources import (
    CheckpointResource,
    LakeResource,
    NotificationResource,
    SparkResource,
)


def default_resources(
    lake: LakeResource | None = None,
    checkpoint: CheckpointResource | None = None,
    notifier: NotificationResource | None = None,
    spark: SparkResource | None = None,
) -> dict[str, object]:
    """Resources keyed as the assets expect them; unset ones read their environment at run time.

    Tests pass their own, pointing into temp dirs.
    """
    lake = lake or LakeResource()
    checkpoint = checkpoint or CheckpointResource()
    notifier = notifier or NotificationResource.from_environment()
    return {
        "lake": lake,
        "checkpoint": checkpoint,
        "notifier": notifier,
        "spark": spark or SparkResource(),
        LAKE_IO_MANAGER_KEY: IdempotentDeltaIOManager(lake=lake, checkpoint=checkpoint),
    }
