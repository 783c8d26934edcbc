"""Schedules: yesterday's partition of the daily lake job, every night."""

import dagster as dg

from idem_assets.defs.automation.jobs import daily_lake_job

daily_lake_schedule = dg.build_schedule_from_partitioned_job(
    daily_lake_job,
    hour_of_day=2,
    minute_of_hour=30,
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
