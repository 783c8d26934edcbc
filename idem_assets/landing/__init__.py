"""Landing layer: reading raw files into contract-typed batches, with every row accounted for."""

from idem_assets.landing.contract import DayBeforeFirstDayError, SourceContract
from idem_assets.landing.errors import LandingFileError, LandingRootError
from idem_assets.landing.files import (
    HashCache,
    LandingFile,
    day_signature,
    list_days,
    snapshot_signature,
)
from idem_assets.landing.layout import Layout, LayoutError
from idem_assets.landing.normalise import QUARANTINE_SCHEMA
from idem_assets.landing.reader import LandingBatch, read_days, read_snapshot
from idem_assets.landing.rules import ValueRule
from idem_assets.landing.store import LandingRoot, landing_root

__all__ = [
    "QUARANTINE_SCHEMA",
    "DayBeforeFirstDayError",
    "HashCache",
    "LandingBatch",
    "LandingFile",
    "LandingFileError",
    "LandingRoot",
    "LandingRootError",
    "Layout",
    "LayoutError",
    "SourceContract",
    "ValueRule",
    "day_signature",
    "landing_root",
    "list_days",
    "read_days",
    "read_snapshot",
    "snapshot_signature",
]
