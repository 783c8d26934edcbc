"""The code location's resource set, built in one place for every environment."""

from __future__ import annotations

import dagster as dg

from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.lib.lake_asset import LAKE_IO_MANAGER_KEY
from idem_assets.resources import (
    NOTIFY_TOKEN_ENV,
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
    """Resources keyed as the assets expect them (tests pass their own in tmp dirs)."""
    lake = lake or LakeResource()
    checkpoint = checkpoint or CheckpointResource()
    notifier = notifier or NotificationResource(token=dg.EnvVar(NOTIFY_TOKEN_ENV))
    return {
        "lake": lake,
        "checkpoint": checkpoint,
        "notifier": notifier,
        "spark": spark or SparkResource(),
        LAKE_IO_MANAGER_KEY: IdempotentDeltaIOManager(lake=lake, checkpoint=checkpoint),
    }
