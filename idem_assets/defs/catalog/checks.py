"""Checks of the product catalog table."""

from idem_assets.checks import lake_asset_checks
from idem_assets.defs.catalog.assets import CATALOG_TABLE

CATALOG_CHECKS = lake_asset_checks(CATALOG_TABLE, None)
