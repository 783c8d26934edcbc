"""A source's last partition day: its landing sensor requests no later day and says why."""

import datetime as dt
import json

import dagster as dg

from idem_assets.lib import source_sensor
from idem_assets.sample import ORDERS_SOURCE
from idem_assets.sources import DailySource
from idem_assets_tests.harness import START, day_keys


def ending(last_day: dt.date) -> DailySource:
    """The shipped orders declaration with its partitions ending on ``last_day``."""
    return DailySource.model_validate(
        {**ORDERS_SOURCE.model_dump(by_alias=True), "last_day": last_day}
    )


def _tick(project, sensor: dg.SensorDefinition, cursor: str | None) -> dg.SensorResult:
    return sensor(
        dg.build_sensor_context(
            cursor=cursor, instance=project.instance, resources={"lake": project.lake}
        )
    )


def test_days_after_the_last_partition_day_are_reported_not_requested(project):
    last = START + dt.timedelta(days=1)
    sensor = source_sensor(ending(last))
    first = _tick(project, sensor, None)
    assert {r.partition_key for r in first.run_requests} == set(day_keys(2))
    quiet = _tick(project, sensor, first.cursor)
    assert quiet.run_requests == []
    assert quiet.skip_reason is not None
    late = day_keys(4)[2:]
    assert quiet.skip_reason.skip_message == (
        f"orders: landing day(s) {late[0]}, {late[1]} are after the last partition day {last} "
        "and are not loaded; set last_day in the source's declaration to load them"
    )
    assert json.loads(quiet.cursor)["late"] == late

    # A later last day makes them partitions: the sensor requests them, once.
    moved = _tick(project, source_sensor(ending(START + dt.timedelta(days=3))), quiet.cursor)
    assert [r.partition_key for r in moved.run_requests] == late
    again = _tick(project, source_sensor(ending(START + dt.timedelta(days=3))), moved.cursor)
    assert again.run_requests == [] and again.skip_reason is None


def test_a_source_without_a_last_day_keeps_its_cursor_as_it_was(project):
    result = _tick(project, source_sensor(ORDERS_SOURCE), None)
    assert {r.partition_key for r in result.run_requests} == set(day_keys(4))
    assert set(json.loads(result.cursor)) == {"v", "seen", "early"}
