"""Checks of the customers table."""

from idem_assets.checks import lake_asset_checks
from idem_assets.defs.customers.assets import CUSTOMERS_TABLE
from idem_assets.partitions import DAILY_PARTITIONS

CUSTOMERS_CHECKS = lake_asset_checks(CUSTOMERS_TABLE, DAILY_PARTITIONS)
