"""Jobs: the daily partitioned lake load and the catalog refresh."""

import dagster as dg

DAILY_ASSETS = ("orders", "customers", "events", "daily_sales")

daily_lake_job = dg.define_asset_job(
    name="daily_lake_job",
    selection=dg.AssetSelection.assets(*DAILY_ASSETS),
    description="Loads one day (or a backfill range in one run) of every daily lake asset, "
    "with their checks.",
)

catalog_job = dg.define_asset_job(
    name="catalog_job",
    selection=dg.AssetSelection.assets("product_catalog"),
    description="Swaps in the newest product catalog snapshot.",
)
