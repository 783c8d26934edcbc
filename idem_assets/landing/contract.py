"""The landing contract: one typed schema per source, and where its files live.

Raw files sit at ``<landing>/<source>/date=YYYY-MM-DD/*.{parquet,csv,jsonl}`` (daily
sources) or ``<landing>/product_catalog/*.csv`` (full snapshots). Every reader
normalises whatever arrives to the schema below; see docs/landing.md.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
MONEY = pa.decimal128(18, 2)
FILE_SUFFIXES = (".parquet", ".csv", ".jsonl")
_DATE_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class SourceContract:
    """What a landing source must provide and how its rows are identified."""

    name: str
    schema: pa.Schema
    natural_key: tuple[str, ...]
    # Newest value wins when the same natural key arrives more than once.
    version_column: str | None
    # Column whose date must equal the date=YYYY-MM-DD folder (None: not checked).
    date_column: str | None = None
    daily: bool = True
    allowed_values: dict[str, frozenset[str]] = field(default_factory=dict)
    non_negative: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        """Contract column names, in schema order."""
        return list(self.schema.names)

    def day_dir(self, landing_dir: str | Path, day: dt.date) -> Path:
        """The folder holding this source's files for ``day``."""
        if not self.daily:
            raise ValueError(f"{self.name} is a snapshot source, it has no day folders")
        return Path(landing_dir) / self.name / f"date={day.isoformat()}"

    def root(self, landing_dir: str | Path) -> Path:
        """The folder holding everything of this source."""
        return Path(landing_dir) / self.name


ORDER_STATUSES = frozenset({"placed", "paid", "shipped", "delivered", "cancelled", "refunded"})
CUSTOMER_SEGMENTS = frozenset({"consumer", "smb", "enterprise"})
EVENT_TYPES = frozenset({"page_view", "add_to_cart", "checkout", "purchase", "support_ticket"})

ORDERS = SourceContract(
    name="orders",
    schema=pa.schema(
        [
            pa.field("order_id", pa.int64(), nullable=False),
            pa.field("customer_id", pa.int64()),
            pa.field("amount", MONEY),
            pa.field("status", pa.string()),
            pa.field("order_date", pa.date32()),
            pa.field("updated_at", UTC_TIMESTAMP),
        ]
    ),
    natural_key=("order_id",),
    version_column="updated_at",
    date_column="order_date",
    allowed_values={"status": ORDER_STATUSES},
    non_negative=("amount",),
)

CUSTOMERS = SourceContract(
    name="customers",
    schema=pa.schema(
        [
            pa.field("customer_id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("email", pa.string()),
            pa.field("segment", pa.string()),
            pa.field("updated_at", UTC_TIMESTAMP),
        ]
    ),
    natural_key=("customer_id",),
    version_column="updated_at",
    allowed_values={"segment": CUSTOMER_SEGMENTS},
)

EVENTS = SourceContract(
    name="events",
    schema=pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("customer_id", pa.int64()),
            pa.field("event_type", pa.string()),
            pa.field("event_time", UTC_TIMESTAMP),
            pa.field("ingested_at", UTC_TIMESTAMP),
            pa.field("payload", pa.string()),
        ]
    ),
    natural_key=("event_id",),
    version_column="ingested_at",
    # The folder date is the ingest day; event_time may be earlier (late events).
    date_column=None,
    allowed_values={"event_type": EVENT_TYPES},
)

PRODUCT_CATALOG = SourceContract(
    name="product_catalog",
    schema=pa.schema(
        [
            pa.field("product_id", pa.int64(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("category", pa.string()),
            pa.field("price", MONEY),
        ]
    ),
    natural_key=("product_id",),
    version_column=None,
    daily=False,
    non_negative=("price",),
)

SOURCES: dict[str, SourceContract] = {
    c.name: c for c in (ORDERS, CUSTOMERS, EVENTS, PRODUCT_CATALOG)
}
DAILY_SOURCES = tuple(name for name, c in SOURCES.items() if c.daily)


def parse_day_dir(name: str) -> dt.date | None:
    """The date of a ``date=YYYY-MM-DD`` folder name, or None if it is not one."""
    match = _DATE_DIR.match(name)
    if not match:
        return None
    try:
        return dt.date.fromisoformat(match.group(1))
    except ValueError:
        return None
