"""Declarative automation for downstream lake assets."""

import dagster as dg


def upstream_data_changed() -> dg.AutomationCondition:
    """An upstream partition this one reads got a new data version (or is requested now).

    ``AutomationCondition.any_deps_updated()`` with data versions instead of materializations:
    a lake asset's data version is its input signature (``lake_asset.output_of``), so a rerun
    that found its inputs unchanged (``committed: false``) updates nothing downstream. Parent
    updates from a run that also updated this asset are ignored, as Dagster's own condition
    does.
    """
    return dg.AutomationCondition.any_deps_match(
        (
            dg.AutomationCondition.data_version_changed()
            & ~dg.AutomationCondition.executed_with_root_target()
        ).with_label("data_version_changed_without_root")
        | dg.AutomationCondition.will_be_requested()
    ).with_label("upstream_data_changed")


def follows_upstream() -> dg.AutomationCondition:
    """Run a partition when an upstream partition it reads has new data.

    ``AutomationCondition.eager()`` without its latest-time-window clause, and on data
    versions: a late file or a backfill of last month's orders updates last month's
    daily_sales too, an unchanged rerun updates nothing. Partitions whose upstream is missing
    or still running wait; a partition already running is not requested again. Nothing is
    requested for history that was never materialized upstream.
    """
    return (
        upstream_data_changed().since_last_handled()
        & ~dg.AutomationCondition.any_deps_missing()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("follows upstream")
