"""Landing layer: the raw-file contract, a vectorised reader and a deterministic generator."""

from idem_assets.landing.contract import (
    CUSTOMERS,
    DAILY_SOURCES,
    EVENTS,
    ORDERS,
    PRODUCT_CATALOG,
    SOURCES,
    SourceContract,
)
from idem_assets.landing.generator import GenerationSummary, generate, write_late_orders
from idem_assets.landing.reader import (
    QUARANTINE_SCHEMA,
    HashCache,
    LandingBatch,
    LandingFile,
    LandingFileError,
    day_signature,
    list_days,
    read_days,
    read_snapshot,
    snapshot_signature,
)

__all__ = [
    "CUSTOMERS",
    "DAILY_SOURCES",
    "EVENTS",
    "ORDERS",
    "PRODUCT_CATALOG",
    "QUARANTINE_SCHEMA",
    "SOURCES",
    "GenerationSummary",
    "HashCache",
    "LandingBatch",
    "LandingFile",
    "LandingFileError",
    "SourceContract",
    "day_signature",
    "generate",
    "list_days",
    "read_days",
    "read_snapshot",
    "snapshot_signature",
    "write_late_orders",
]
