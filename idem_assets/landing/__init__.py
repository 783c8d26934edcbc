"""Landing layer: reading raw files into contract-typed batches, with every row accounted for."""

from typing import Any

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
from idem_assets.landing.reader import LandingBatch, read_days, read_snapshot
from idem_assets.landing.rules import ValueRule
from idem_assets.landing.store import LandingRoot, landing_root


def __getattr__(name: str) -> Any:
    # QUARANTINE_SCHEMA is built on first use: importing this layer does not import Arrow.
    if name == "QUARANTINE_SCHEMA":
        from idem_assets.landing.normalise import quarantine_schema

        return quarantine_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
