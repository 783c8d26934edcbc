"""The shipped example domain's sources, read from their declarations in ``idem_assets/defs``.

Python code that needs a shipped source (the sample generator, daily_sales, the tests)
reads the same ``defs.yaml`` the code location loads, so there is one declaration each.
"""

from __future__ import annotations

from pathlib import Path

from idem_assets.landing.contract import SourceContract
from idem_assets.sources import LandingSource, load_source
from idem_assets.stream.source import StreamSource, stream_of

DEFS_DIR = Path(__file__).resolve().parent.parent / "defs"

ORDERS_SOURCE: LandingSource = load_source(DEFS_DIR / "orders" / "defs.yaml")
CUSTOMERS_SOURCE: LandingSource = load_source(DEFS_DIR / "customers" / "defs.yaml")
EVENTS_SOURCE: LandingSource = load_source(DEFS_DIR / "events" / "defs.yaml")
CATALOG_SOURCE: LandingSource = load_source(DEFS_DIR / "catalog" / "defs.yaml")

ORDERS: SourceContract = ORDERS_SOURCE.contract()
CUSTOMERS: SourceContract = CUSTOMERS_SOURCE.contract()
EVENTS: SourceContract = EVENTS_SOURCE.contract()
PRODUCT_CATALOG: SourceContract = CATALOG_SOURCE.contract()

SOURCES: dict[str, SourceContract] = {
    c.name: c for c in (ORDERS, CUSTOMERS, EVENTS, PRODUCT_CATALOG)
}
DAILY_SOURCES = tuple(name for name, c in SOURCES.items() if c.daily)

# The append-only events stream of the sample domain (stream files carry events' columns).
EVENTS_STREAM: StreamSource = stream_of(EVENTS, "events_stream", erasable_keys=("customer_id",))
