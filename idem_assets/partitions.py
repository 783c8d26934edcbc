"""Daily partitions: built in one place from a source's first (and last) day, and read back
as dates."""

from __future__ import annotations

import datetime as dt
from typing import Protocol

import dagster as dg


def daily_partitions(
    first_day: dt.date, last_day: dt.date | None = None
) -> dg.DailyPartitionsDefinition:
    """UTC days from ``first_day`` through ``last_day`` (both included; without a last day,
    up to today): the partitions of every daily lake asset.

    Two sources with the same first and last day get equal definitions, so their assets can
    share jobs, backfills and dependencies.
    """
    if last_day is not None and last_day < first_day:
        raise ValueError(f"last_day {last_day} is before first_day {first_day}")
    # Dagster's end_date is exclusive: the day after the last partition.
    end = None if last_day is None else (last_day + dt.timedelta(days=1)).isoformat()
    return dg.DailyPartitionsDefinition(
        start_date=first_day.isoformat(), end_date=end, timezone="UTC"
    )


# One run materializes a whole backfill range in one Delta commit per asset.
SINGLE_RUN_BACKFILL = dg.BackfillPolicy.single_run()

# The run tags that say which partitions a run covers: one partition, or a single-run
# backfill's range (Dagster's own tag names).
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


class _HasTimeWindow(Protocol):
    @property
    def partition_time_window(self) -> dg.TimeWindow: ...


def window_dates(window: dg.TimeWindow) -> tuple[dt.date, dt.date]:
    """The half-open ``[start, end)`` day range of a daily time window."""
    start = window.start.astimezone(dt.UTC)
    end = window.end.astimezone(dt.UTC)
    if start.timetz() != dt.time(0, tzinfo=dt.UTC) or end.timetz() != dt.time(0, tzinfo=dt.UTC):
        raise ValueError(f"time window {window} does not fall on UTC day boundaries")
    return start.date(), end.date()


def partition_dates(context: _HasTimeWindow) -> tuple[dt.date, dt.date]:
    """``[start, end)`` days of the partition(s) a run, check or IO call covers."""
    return window_dates(context.partition_time_window)
