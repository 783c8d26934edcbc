"""Idempotent daily assets on Dagster and Delta Lake.

The names a user imports are here, loaded on first use, so that importing a Dagster-free
layer (``idem_assets.lake``, ``idem_assets.landing``, ...) never imports Dagster::

    from idem_assets import DailySource, IdempotentDeltaIOManager, WriteSpec
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from idem_assets._version import __version__

# The Dagster-facing names a project needs. The Dagster-free layers keep their own faces:
# idem_assets.lake (idempotent writes), .landing, .checkpoint, .stream, .notify, .spark.
_EXPORTS = {
    "IdempotentDeltaIOManager": "idem_assets.io_manager",
    "TableOutput": "idem_assets.io_manager",
    "MergeConfig": "idem_assets.io_manager.delta_modes",
    "MergeType": "idem_assets.io_manager.delta_modes",
    "MergeOperationsConfig": "idem_assets.io_manager.delta_modes",
    "WhenMatchedUpdate": "idem_assets.io_manager.delta_modes",
    "WhenMatchedUpdateAll": "idem_assets.io_manager.delta_modes",
    "WhenMatchedDelete": "idem_assets.io_manager.delta_modes",
    "WhenNotMatchedInsert": "idem_assets.io_manager.delta_modes",
    "WhenNotMatchedInsertAll": "idem_assets.io_manager.delta_modes",
    "WhenNotMatchedBySourceDelete": "idem_assets.io_manager.delta_modes",
    "WhenNotMatchedBySourceUpdate": "idem_assets.io_manager.delta_modes",
    "WriteMode": "idem_assets.io_manager.delta_modes",
    "SchemaMode": "idem_assets.io_manager.delta_modes",
    "WriteSpec": "idem_assets.io_manager.spec",
    "Window": "idem_assets.io_manager",
    "daily_partitions": "idem_assets.partitions",
    "partition_dates": "idem_assets.partitions",
    "LandingSource": "idem_assets.sources",
    "DailySource": "idem_assets.sources",
    "SnapshotSource": "idem_assets.sources",
    "Column": "idem_assets.sources",
    "Rule": "idem_assets.sources",
    "AllowedRule": "idem_assets.sources",
    "PatternRule": "idem_assets.sources",
    "NonNegativeRule": "idem_assets.sources",
    "RangeRule": "idem_assets.sources",
    "load_source": "idem_assets.sources",
    "LandingSourceComponent": "idem_assets.lib",
    "LakeAssetDef": "idem_assets.lib",
    "lake_asset": "idem_assets.lib",
    "LakeCheck": "idem_assets.lib.checks",
    "CheckName": "idem_assets.lib.checks",
    "source_definitions": "idem_assets.lib",
    "default_resources": "idem_assets.lib",
    "consume_changes": "idem_assets.lib",
    "append_changes": "idem_assets.lib",
    "changes_metadata": "idem_assets.lib",
    "maintenance_definitions": "idem_assets.lib.maintenance",
    "CheckpointResource": "idem_assets.resources",
    "LakeResource": "idem_assets.resources",
    "NotificationResource": "idem_assets.resources",
    "open_store": "idem_assets.checkpoint",
    "Status": "idem_assets.checkpoint",
}

if TYPE_CHECKING:  # what type checkers see; at run time each name loads on first use
    from idem_assets.checkpoint import Status, open_store
    from idem_assets.io_manager import (
        IdempotentDeltaIOManager,
        TableOutput,
        Window,
    )
    from idem_assets.io_manager.delta_modes import (
        MergeConfig,
        MergeOperationsConfig,
        MergeType,
        SchemaMode,
        WhenMatchedDelete,
        WhenMatchedUpdate,
        WhenMatchedUpdateAll,
        WhenNotMatchedBySourceDelete,
        WhenNotMatchedBySourceUpdate,
        WhenNotMatchedInsert,
        WhenNotMatchedInsertAll,
        WriteMode,
    )
    from idem_assets.io_manager.spec import WriteSpec
    from idem_assets.lib import (
        LakeAssetDef,
        LandingSourceComponent,
        append_changes,
        changes_metadata,
        consume_changes,
        default_resources,
        lake_asset,
        source_definitions,
    )
    from idem_assets.lib.checks import CheckName, LakeCheck
    from idem_assets.lib.maintenance import maintenance_definitions
    from idem_assets.partitions import (
        daily_partitions,
        partition_dates,
    )
    from idem_assets.resources import (
        CheckpointResource,
        LakeResource,
        NotificationResource,
    )
    from idem_assets.sources import (
        AllowedRule,
        Column,
        DailySource,
        LandingSource,
        NonNegativeRule,
        PatternRule,
        RangeRule,
        Rule,
        SnapshotSource,
        load_source,
    )

__all__ = [
    "__version__",
    "AllowedRule",
    "CheckName",
    "CheckpointResource",
    "Column",
    "DailySource",
    "IdempotentDeltaIOManager",
    "LakeAssetDef",
    "LakeCheck",
    "LakeResource",
    "LandingSource",
    "LandingSourceComponent",
    "MergeConfig",
    "MergeOperationsConfig",
    "MergeType",
    "NonNegativeRule",
    "NotificationResource",
    "PatternRule",
    "RangeRule",
    "Rule",
    "SchemaMode",
    "SnapshotSource",
    "Status",
    "TableOutput",
    "WhenMatchedDelete",
    "WhenMatchedUpdate",
    "WhenMatchedUpdateAll",
    "WhenNotMatchedBySourceDelete",
    "WhenNotMatchedBySourceUpdate",
    "WhenNotMatchedInsert",
    "WhenNotMatchedInsertAll",
    "Window",
    "WriteMode",
    "WriteSpec",
    "append_changes",
    "changes_metadata",
    "consume_changes",
    "daily_partitions",
    "default_resources",
    "lake_asset",
    "load_source",
    "maintenance_definitions",
    "open_store",
    "partition_dates",
    "source_definitions",
]


def __getattr__(name: str) -> Any:
    """The public names, imported from their modules when first asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'idem_assets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
