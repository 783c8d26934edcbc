"""Reusable Dagster building blocks: lake assets, landing outputs, source declarations."""

from idem_assets.lib.component import LandingSourceComponent
from idem_assets.lib.lake_asset import LAKE_IO_MANAGER_KEY, EngineConfig, LakeAssetDef, lake_asset
from idem_assets.lib.source import lake_asset_def, source_asset, source_definitions

__all__ = [
    "LAKE_IO_MANAGER_KEY",
    "EngineConfig",
    "LakeAssetDef",
    "LandingSourceComponent",
    "lake_asset",
    "lake_asset_def",
    "source_asset",
    "source_definitions",
]
