"""Landing sensors: same files never trigger twice; a changed file triggers exactly one run."""

import datetime as dt
import json
import os
import shutil

import dagster as dg

from idem_assets.lib import source_sensor
from idem_assets.sample import CATALOG_SOURCE, CUSTOMERS_SOURCE, EVENTS_SOURCE, ORDERS_SOURCE
from idem_assets.sample.generator import write_late_orders
from idem_assets_tests.harness import START, day_keys

SENSORS = {s.name: source_sensor(s) for s in (ORDERS_SOURCE, CUSTOMERS_SOURCE, EVENTS_SOURCE)}
catalog_sensor = source_sensor(CATALOG_SOURCE)


def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """The three daily sources' sensors ticked together, one cursor each."""
    cursors = json.loads(context.cursor) if context.cursor else {}
    requests, out = [], {}
    for name, sensor in SENSORS.items():
        sub = dg.build_sensor_context(
            cursor=cursors.get(name),
            instance=context.instance,
            resources={"lake": context.resources.lake},
        )
        result = sensor(sub)
        requests.extend(result.run_requests or [])
        out[name] = result.cursor
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(out, sort_keys=True))


def _tick(project, sensor, cursor):
    context = dg.build_sensor_context(
        cursor=cursor, instance=project.instance, resources={"lake": project.lake}
    )
    result = sensor(context)
    return result.run_requests or [], result.cursor


def test_each_declared_source_has_its_sensor_in_the_code_location(project):
    names = {s.name for s in project.definitions().sensors}
    assert {
        "orders_landing_sensor",
        "customers_landing_sensor",
        "events_landing_sensor",
        "product_catalog_landing_sensor",
    } <= names


def test_first_tick_requests_each_source_day_once_then_nothing(project):
    requests, cursor = _tick(project, landing_sensor, None)
    keys = day_keys(4)
    pairs = {(r.tags["idem/source"], r.partition_key) for r in requests}
    assert pairs == {(s, k) for s in ("orders", "customers", "events") for k in keys}
    assert len({r.run_key for r in requests}) == len(requests) == 12
    orders_request = next(r for r in requests if r.tags["idem/source"] == "orders")
    assert {k.to_user_string() for k in orders_request.asset_selection} == {"orders", "daily_sales"}
    again, cursor2 = _tick(project, landing_sensor, cursor)
    assert again == []
    assert cursor2 == cursor


def test_days_before_the_first_partition_day_are_reported_not_requested(project):
    early = START - dt.timedelta(days=3)
    src = project.landing / "orders" / f"date={START.isoformat()}"
    shutil.copytree(src, project.landing / "orders" / f"date={early.isoformat()}")
    sensor = SENSORS["orders"]
    first = sensor(
        dg.build_sensor_context(instance=project.instance, resources={"lake": project.lake})
    )
    assert {r.partition_key for r in first.run_requests} == set(day_keys(4))
    quiet = sensor(
        dg.build_sensor_context(
            cursor=first.cursor, instance=project.instance, resources={"lake": project.lake}
        )
    )
    assert quiet.run_requests == []
    assert quiet.skip_reason is not None
    assert quiet.skip_reason.skip_message == (
        f"orders: landing day(s) {early} are before the first partition day 2024-03-01 and are "
        "not loaded; set first_day in the source's declaration to load them"
    )


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
