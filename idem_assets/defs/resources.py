"""The code location's resource set, built in one place for every environment."""

from __future__ import annotations

from idem_assets.defs.lake_asset import LAKE_IO_MANAGER_KEY
from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.resources import CheckpointResource, LakeResource


def default_resources(
    lake: LakeResource | None = None, checkpoint: CheckpointResource | None = None
) -> dict[str, object]:
    """Resources keyed as the assets expect them (tests pass a lake in tmp dirs)."""
    lake = lake or LakeResource()
    checkpoint = checkpoint or CheckpointResource()
    return {
        "lake": lake,
        "checkpoint": checkpoint,
        LAKE_IO_MANAGER_KEY: IdempotentDeltaIOManager(lake=lake, checkpoint=checkpoint),
    }
