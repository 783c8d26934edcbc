"""Daily partitions: built in one place from a source's first day, and read back as dates."""

from __future__ import annotations

import datetime as dt
from typing import Protocol

import dagster as dg


def daily_partitions(first_day: dt.date) -> dg.DailyPartitionsDefinition:
    """UTC days from ``first_day`` on: the partitions of every daily lake asset.

    Two sources with the same first day get equal definitions, so their assets can share
    jobs, backfills and dependencies.
    """
    return dg.DailyPartitionsDefinition(start_date=first_day.isoformat(), timezone="UTC")


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
