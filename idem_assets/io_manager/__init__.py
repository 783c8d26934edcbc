"""The idempotent Delta IO manager and its per-asset write spec."""

from idem_assets.io_manager.batch import PreparedBatch, prepare
from idem_assets.io_manager.delta_modes import MergeConfig, MergeType, SchemaMode, WriteMode
from idem_assets.io_manager.inputs import read
from idem_assets.io_manager.manager import IdempotentDeltaIOManager, output_window, target_table
from idem_assets.io_manager.output import StaleSkipError, TableOutput, UnsettledWriteError
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes import RerunComparison, compare, compare_days, write

__all__ = [
    "IdempotentDeltaIOManager",
    "MergeConfig",
    "MergeType",
    "SchemaMode",
    "WriteMode",
    "PreparedBatch",
    "RerunComparison",
    "StaleSkipError",
    "UnsettledWriteError",
    "TableOutput",
    "Window",
    "WriteSpec",
    "compare",
    "compare_days",
    "output_window",
    "prepare",
    "read",
    "target_table",
    "write",
]
