"""Asset checks that prove idempotence: rerun equality and natural-key uniqueness."""

from idem_assets.checks.factory import RERUN_EQUALITY, UNIQUE_NATURAL_KEY, lake_asset_checks

__all__ = ["RERUN_EQUALITY", "UNIQUE_NATURAL_KEY", "lake_asset_checks"]
