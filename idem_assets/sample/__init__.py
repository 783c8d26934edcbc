"""The shipped example domain: its source declarations and a deterministic data generator.

The generator (``generate``, ``write_late_orders``) loads on first use: the code location
reads the declarations here and never writes sample files.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from idem_assets.sample.generator import GenerationSummary, generate, write_late_orders

_GENERATOR = ("GenerationSummary", "generate", "write_late_orders")


def __getattr__(name: str) -> Any:
    if name in _GENERATOR:
        from idem_assets.sample import generator

        return getattr(generator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
