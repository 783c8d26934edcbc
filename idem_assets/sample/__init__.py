"""The shipped example domain: its source declarations and a deterministic data generator."""

from idem_assets.sample.generator import GenerationSummary, generate, write_late_orders
from idem_assets.sample.sources import (
    CATALOG_SOURCE,
    CUSTOMERS,
    CUSTOMERS_SOURCE,
    DAILY_SOURCES,
    EVENTS,
    EVENTS_SOURCE,
    EVENTS_STREAM,
    ORDERS,
    ORDERS_SOURCE,
    PRODUCT_CATALOG,
    SOURCES,
)

__all__ = [
    "CATALOG_SOURCE",
    "CUSTOMERS",
    "CUSTOMERS_SOURCE",
    "DAILY_SOURCES",
    "EVENTS",
    "EVENTS_SOURCE",
    "EVENTS_STREAM",
    "ORDERS",
    "ORDERS_SOURCE",
    "PRODUCT_CATALOG",
    "SOURCES",
    "GenerationSummary",
    "generate",
    "write_late_orders",
]
