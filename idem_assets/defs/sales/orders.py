"""What daily_sales and its reconciliation know of orders."""

from idem_assets.lib import lake_asset_def
from idem_assets.sample.sources import ORDERS_SOURCE

# The orders table as its declaration (defs/orders/defs.yaml) defines it.
ORDERS_TABLE = lake_asset_def(ORDERS_SOURCE)

# Orders in these states earn nothing.
NON_REVENUE_STATUSES = ("cancelled", "refunded")
