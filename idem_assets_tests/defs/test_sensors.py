"""Landing sensor: same files never trigger twice; a changed file triggers exactly one run."""

import datetime as dt
import os

import dagster as dg
from idem_assets.defs.automation.sensors import catalog_sensor, landing_sensor

from idem_assets.sample.generator import write_late_orders
from idem_assets_tests.harness import day_keys


def _tick(project, sensor, cursor):
    context = dg.build_sensor_context(cursor=cursor, instance=project.instance,
                                      resources={"lake": project.lake})
    result = sensor(context)
    return result.run_requests or [], result.cursor


def test_first_tick_requests_each_source_day_once_then_nothing(project):
    requests, cursor = _tick(project, landing_sensor, None)
    keys = day_keys(4)
    pairs = {(r.tags["idem/source"], r.partition_key) for r in requests}
    assert pairs == {(s, k) for s in ("orders", "customers", "events") for k in keys}
    assert len({r.run_key for r in requests}) == len(requests) == 12
    orders_request = next(r for r in requests if r.tags["idem/source"] == "orders")
    assert {k.to_user_string() for k in orders_request.asset_selection} == {
        "orders", "daily_sales"}
    again, cursor2 = _tick(project, landing_sensor, cursor)
    assert again == []
    assert cursor2 == cursor


def test_changed_file_triggers_exactly_one_run(project):
    _, cursor = _tick(project, landing_sensor, None)
    keys = day_keys(4)
    write_late_orders(project.landing, dt.date.fromisoformat(keys[2]), seed=5, n=3)
    requests, cursor = _tick(project, landing_sensor, cursor)
    assert [(r.tags["idem/source"], r.partition_key) for r in requests] == [("orders", keys[2])]
    again, _ = _tick(project, landing_sensor, cursor)
    assert again == []


def test_touching_a_file_without_changing_it_triggers_nothing(project):
    _, cursor = _tick(project, landing_sensor, None)
    folder = project.landing / "events" / f"date={day_keys(1)[0]}"
    for path in folder.iterdir():
        os.utime(path, ns=(1, 1))
    requests, _ = _tick(project, landing_sensor, cursor)
    assert requests == []


def test_content_changed_back_reruns_with_a_new_run_key(project):
    _, cursor = _tick(project, landing_sensor, None)
    day = day_keys(1)[0]
    late = write_late_orders(project.landing, dt.date.fromisoformat(day), seed=3, n=2)
    changed, cursor = _tick(project, landing_sensor, cursor)
    late.unlink()
    reverted, cursor = _tick(project, landing_sensor, cursor)
    assert len(changed) == len(reverted) == 1
    assert changed[0].run_key != reverted[0].run_key


def test_catalog_sensor_fires_once_per_snapshot_content(project):
    requests, cursor = _tick(project, catalog_sensor, None)
    assert len(requests) == 1
    again, _ = _tick(project, catalog_sensor, cursor)
    assert again == []
