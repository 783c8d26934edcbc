"""Declarative automation: downstream assets follow their upstream partitions."""

import dagster as dg

# Evaluates the assets' AutomationConditions (daily_sales and notifications follow orders,
# see lib/automation.py). Stopped by default in a deployment; `make run` starts it.
lake_automation = dg.AutomationConditionSensorDefinition(
    "lake_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.STOPPED,
    minimum_interval_seconds=30,
    description="Requests a downstream partition (daily_sales, notifications) once each time "
    "the upstream partition it reads is updated.",
)
