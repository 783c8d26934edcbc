"""Declarative automation: a new or changed orders partition requests its downstream once."""

from __future__ import annotations

import datetime as dt
import sys

import dagster as dg

from idem_assets.lib import default_resources
from idem_assets.sample.generator import write_late_orders
from idem_assets_tests.harness import day_keys, new_project

DOWNSTREAM = (dg.AssetKey("daily_sales"), dg.AssetKey("notifications"))


def _requested(result) -> dict[dg.AssetKey, set[str]]:
    return {key: set(result.get_requested_partitions(key)) for key in DOWNSTREAM}


def test_an_updated_orders_partition_requests_its_downstream_partition_exactly_once(tmp_path):
    project = new_project(tmp_path, days=2)
    first, second = day_keys(2)
    definitions = project.definitions()
    tick = dg.evaluate_automation_conditions(defs=definitions, instance=project.instance)
    assert tick.total_requested == 0  # nothing upstream yet, no history requested

    assert project.run_days(first, assets=["orders"]).success
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=project.instance, cursor=tick.cursor
    )
    assert _requested(tick) == {key: {first} for key in DOWNSTREAM}
    # The next tick, nothing new upstream: nothing requested again.
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=project.instance, cursor=tick.cursor
    )
    assert tick.total_requested == 0

    # A new day, and a rerun of an old one on unchanged files (it commits nothing): only the
    # new day is requested downstream.
    assert project.run_days(second, assets=["orders"]).success
    rerun = project.run_days(first, assets=["orders"])
    assert rerun.success
    (materialization,) = rerun.asset_materializations_for_node("orders")
    assert materialization.metadata["committed"].value is False
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=project.instance, cursor=tick.cursor
    )
    assert _requested(tick) == {key: {second} for key in DOWNSTREAM}

    # A late file on the old day (a backfill of changed files) updates that day downstream,
    # not only the latest.
    write_late_orders(project.landing, dt.date.fromisoformat(first), seed=7, n=5)
    assert project.run_days(first, assets=["orders"]).success
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=project.instance, cursor=tick.cursor
    )
    assert _requested(tick) == {key: {first} for key in DOWNSTREAM}


def test_a_landing_run_that_also_built_daily_sales_leaves_automation_nothing_to_request(tmp_path):
    """orders' landing sensor requests daily_sales in the same run: automation adds no second."""
    project = new_project(tmp_path, days=1)
    (day,) = day_keys(1)
    definitions = project.definitions()
    tick = dg.evaluate_automation_conditions(defs=definitions, instance=project.instance)
    assert project.run_days(day, assets=["orders", "daily_sales"]).success
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=project.instance, cursor=tick.cursor
    )
    assert _requested(tick) == {
        dg.AssetKey("daily_sales"): set(),
        dg.AssetKey("notifications"): {day},
    }


CRON_SOURCE = """\
type: idem_assets.lib.LandingSourceComponent
attributes:
  name: feed
  first_day: 2024-03-01
  columns:
    - {name: id, type: int64}
    - {name: day, type: date}
  natural_key: [id]
  partition_date: day
post_processing:
  assets:
    - target: "*"
      attributes:
        automation_condition: "{{ dg.AutomationCondition.on_cron('0 6 * * *') }}"
"""


def test_a_yaml_source_takes_its_automation_condition_from_post_processing(tmp_path):
    """A declared source is automated the Dagster way: `post_processing` in its defs.yaml."""
    project = tmp_path / "project"
    (project / "feed_defs" / "defs" / "feed").mkdir(parents=True)
    (project / "feed_defs" / "__init__.py").write_text("")
    (project / "feed_defs" / "defs" / "__init__.py").write_text("")
    (project / "feed_defs" / "defs" / "feed" / "defs.yaml").write_text(CRON_SOURCE)
    (project / "pyproject.toml").write_text(
        '[tool.dg]\ndirectory_type = "project"\n[tool.dg.project]\n'
        'root_module = "feed_defs"\ndefs_module = "feed_defs.defs"\n'
    )
    sys.path.insert(0, str(project))
    try:
        definitions = dg.Definitions.merge(
            dg.load_from_defs_folder(path_within_project=project),
            dg.Definitions(resources=default_resources()),
        )
    finally:
        sys.path.remove(str(project))
        for name in [m for m in sys.modules if m.startswith("feed_defs")]:
            del sys.modules[name]
    feed = dg.AssetKey("feed")
    spec = next(s for s in definitions.resolve_all_asset_specs() if s.key == feed)
    assert spec.automation_condition is not None
    assert "0 6 * * *" in str(spec.automation_condition.get_label() or spec.automation_condition)

    instance = dg.DagsterInstance.ephemeral()
    before = dt.datetime(2024, 3, 5, 5, 0, tzinfo=dt.UTC)
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=instance, evaluation_time=before
    )
    assert tick.total_requested == 0
    # 06:00 passed: the day that just ended is requested, once.
    after = before + dt.timedelta(hours=2)
    tick = dg.evaluate_automation_conditions(
        defs=definitions, instance=instance, cursor=tick.cursor, evaluation_time=after
    )
    assert set(tick.get_requested_partitions(feed)) == {"2024-03-04"}
    tick = dg.evaluate_automation_conditions(
        defs=definitions,
        instance=instance,
        cursor=tick.cursor,
        evaluation_time=after + dt.timedelta(minutes=30),
    )
    assert tick.total_requested == 0


def _freshness(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    """The asset's freshness state, as Dagster's evaluator of a time-window policy says."""
    import asyncio

    from dagster._core.definitions.freshness_evaluator import TimeWindowFreshnessPolicyEvaluator
    from dagster._core.loader import LoadingContextForTest

    node = defs.resolve_asset_graph().get(key)
    state = asyncio.run(
        TimeWindowFreshnessPolicyEvaluator().evaluate_freshness(
            LoadingContextForTest(instance), node
        )
    )
    return state.value


def test_freshness_follows_each_run_a_range_and_its_unchanged_rerun_included(tmp_path):
    """A lake asset with a time-window freshness policy: unknown before its first run, fresh
    after a range, still fresh after an unchanged rerun of it (which commits nothing), and
    stale once the window has passed without a run."""
    project = new_project(tmp_path, days=3)
    keys = day_keys(3)
    key = dg.AssetKey("orders")

    def with_policy(window: dt.timedelta) -> dg.Definitions:
        """orders as the code location defines it, with a time-window freshness policy."""
        policy = dg.FreshnessPolicy.time_window(fail_window=window)
        orders = project.definitions().resolve_assets_def(key)
        return dg.Definitions(
            assets=[orders.map_asset_specs(lambda s: s.replace_attributes(freshness_policy=policy))]
        )

    day = with_policy(dt.timedelta(days=1))
    assert _freshness(day, project.instance, key) == "UNKNOWN"
    assert project.run_days(keys[0], keys[-1], assets=["orders"]).success
    assert _freshness(day, project.instance, key) == "PASS"
    rerun = project.run_days(keys[0], keys[-1], assets=["orders"])
    assert rerun.success
    (materialization, *_) = rerun.asset_materializations_for_node("orders")
    assert materialization.metadata["committed"].value is False
    assert _freshness(day, project.instance, key) == "PASS"
    # A day and a minute later, without a run: the asset is stale (Dagster's clock moved,
    # nothing waits).
    from dagster._core.test_utils import freeze_time

    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1, minutes=1)
    with freeze_time(later):
        assert _freshness(day, project.instance, key) == "FAIL"
