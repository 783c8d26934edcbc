"""The code location: domain definitions plus project-wide resources."""

import dagster as dg

from idem_assets.defs.automation.jobs import catalog_job, daily_lake_job
from idem_assets.defs.automation.schedules import daily_lake_schedule
from idem_assets.defs.automation.sensors import catalog_sensor, landing_sensor
from idem_assets.defs.catalog.assets import product_catalog
from idem_assets.defs.catalog.checks import CATALOG_CHECKS
from idem_assets.defs.customers.assets import customers
from idem_assets.defs.customers.checks import CUSTOMERS_CHECKS
from idem_assets.defs.events.assets import events
from idem_assets.defs.events.checks import EVENTS_CHECKS
from idem_assets.defs.notifications.assets import notifications
from idem_assets.defs.notifications.checks import NOTIFICATION_CHECKS
from idem_assets.defs.notifications.sensors import (
    notification_retry_sensor,
    notifications_job,
    notifications_redrive_job,
)
from idem_assets.defs.orders.assets import orders
from idem_assets.defs.orders.checks import ORDERS_CHECKS
from idem_assets.defs.resources import default_resources
from idem_assets.defs.sales.assets import daily_sales
from idem_assets.defs.sales.checks import SALES_CHECKS
from idem_assets.defs.stream.assets import events_stream
from idem_assets.defs.stream.checks import STREAM_CHECKS
from idem_assets.defs.stream.jobs import events_stream_job
from idem_assets.defs.stream.sensors import events_stream_sensor


def build_definitions(resources: dict[str, object]) -> dg.Definitions:
    """Every domain's definitions bound to ``resources``."""
    return dg.Definitions(
        assets=[orders, customers, events, product_catalog, daily_sales, notifications,
                events_stream],
        asset_checks=[*ORDERS_CHECKS, *CUSTOMERS_CHECKS, *EVENTS_CHECKS, *CATALOG_CHECKS,
                      *SALES_CHECKS, *NOTIFICATION_CHECKS, *STREAM_CHECKS],
        jobs=[daily_lake_job, catalog_job, notifications_job, notifications_redrive_job,
              events_stream_job],
        schedules=[daily_lake_schedule],
        sensors=[landing_sensor, catalog_sensor, notification_retry_sensor, events_stream_sensor],
        resources=resources,
    )


defs = build_definitions(default_resources())
