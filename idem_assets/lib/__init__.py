"""Reusable Dagster building blocks: lake assets, landing outputs, source declarations."""

from idem_assets.lib.asset_def import LAKE_IO_MANAGER_KEY, EngineConfig, LakeAssetDef
from idem_assets.lib.changes import append_changes, changes_metadata, consume_changes
from idem_assets.lib.component import LandingSourceComponent
from idem_assets.lib.lake_asset import lake_asset
from idem_assets.lib.resources import default_resources
from idem_assets.lib.source import lake_asset_def, source_asset, source_definitions, source_sensor

__all__ = [
    "LAKE_IO_MANAGER_KEY",
    "EngineConfig",
    "LakeAssetDef",
    "LandingSourceComponent",
    "append_changes",
    "changes_metadata",
    "consume_changes",
    "default_resources",
    "lake_asset",
    "lake_asset_def",
    "source_asset",
    "source_definitions",
    "source_sensor",
]
