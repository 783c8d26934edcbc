"""Checks of the orders table: blocking, because daily_sales is computed from it."""

from idem_assets.checks import lake_asset_checks
from idem_assets.defs.orders.assets import ORDERS_TABLE
from idem_assets.partitions import DAILY_PARTITIONS

ORDERS_CHECKS = lake_asset_checks(ORDERS_TABLE, DAILY_PARTITIONS, blocking=True)
