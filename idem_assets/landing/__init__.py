"""Landing layer: reading raw files into contract-typed batches, with every row accounted for."""

from idem_assets.landing.contract import DayBeforeFirstDayError, SourceContract
from idem_assets.landing.files import (
    HashCache,
    LandingFile,
    LandingFileError,
    day_signature,
    list_days,
    snapshot_signature,
)
from idem_assets.landing.layout import Layout, LayoutError
from idem_assets.landing.normalise import QUARANTINE_SCHEMA
from idem_assets.landing.reader import LandingBatch, read_days, read_snapshot
from idem_assets.landing.rules import ValueRule

__all__ = [
    "QUARANTINE_SCHEMA",
    "DayBeforeFirstDayError",
    "HashCache",
    "LandingBatch",
    "LandingFile",
    "LandingFileError",
    "Layout",
    "LayoutError",
    "SourceContract",
    "ValueRule",
    "day_signature",
    "list_days",
    "read_days",
    "read_snapshot",
    "snapshot_signature",
]
