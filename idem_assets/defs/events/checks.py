"""Checks of the events table."""

from idem_assets.checks import lake_asset_checks
from idem_assets.defs.events.assets import EVENTS_TABLE
from idem_assets.partitions import DAILY_PARTITIONS

EVENTS_CHECKS = lake_asset_checks(EVENTS_TABLE, DAILY_PARTITIONS)
