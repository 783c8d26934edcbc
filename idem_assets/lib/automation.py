"""Declarative automation for downstream lake assets."""

import dagster as dg


def follows_upstream() -> dg.AutomationCondition:
    """Run a partition when an upstream partition it reads was updated.

    ``AutomationCondition.eager()`` without its latest-time-window clause: a late file or
    a backfill of last month's orders updates last month's daily_sales too. Partitions whose
    upstream is missing or still running wait; a partition already running is not requested
    again. Nothing is requested for history that was never materialized upstream.
    """
    return (
        dg.AutomationCondition.any_deps_updated().since_last_handled()
        & ~dg.AutomationCondition.any_deps_missing()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("follows upstream")
