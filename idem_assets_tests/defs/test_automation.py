"""Declarative automation: a new or changed orders partition requests its downstream once."""

from __future__ import annotations

import dagster as dg

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
    tick = dg.evaluate_automation_conditions(defs=definitions, instance=project.instance,
                                             cursor=tick.cursor)
    assert _requested(tick) == {key: {first} for key in DOWNSTREAM}
    # The next tick, nothing new upstream: nothing requested again.
    tick = dg.evaluate_automation_conditions(defs=definitions, instance=project.instance,
                                             cursor=tick.cursor)
    assert tick.total_requested == 0

    # An old day loaded late (a backfill) updates that day downstream, not only the latest.
    assert project.run_days(second, assets=["orders"]).success
    assert project.run_days(first, assets=["orders"]).success
    tick = dg.evaluate_automation_conditions(defs=definitions, instance=project.instance,
                                             cursor=tick.cursor)
    assert _requested(tick) == {key: {first, second} for key in DOWNSTREAM}

