"""Every partition kind dagster-deltalake handles, and a little more, replaced exactly.

Time windows of any cadence (and single-run backfill ranges), static, dynamic and
multi-partitions, partitioned inputs and partition mappings: each write replaces exactly
the run's partitions, and materializing again commits no new Delta version.
"""

import datetime as dt

import dagster as dg
import pyarrow as pa
import pytest
from dagster_deltalake import DeltaLakePyarrowIOManager, LocalConfig

from idem_assets.lake import read_rows
from idem_assets_tests.io_manager.dropin import committed, manager, rows, table, version

DAILY = dg.DailyPartitionsDefinition(start_date="2022-01-01")
COLORS = dg.StaticPartitionsDefinition(["red", "yellow", "blue"])
RANGE = {
    "dagster/asset_partition_range_start": "2022-01-01",
    "dagster/asset_partition_range_end": "2022-01-03",
}


class Value(dg.Config):
    value: str = "1"


def _day(key: str) -> dt.date:
    return dt.date.fromisoformat(key)


@dg.asset(partitions_def=DAILY, key_prefix=["my_schema"], metadata={"partition_expr": "time"})
def daily_partitioned(context: dg.AssetExecutionContext, config: Value) -> pa.Table:
    window = context.partition_time_window
    days = [
        window.start.date() + dt.timedelta(days=i) for i in range((window.end - window.start).days)
    ]
    return pa.table(
        {
            "time": [d for d in days for _ in range(3)],
            "a": [config.value] * 3 * len(days),
            "b": [4, 5, 6] * len(days),
        }
    )


def _run(assets, root, value="1", **kwargs):
    config = {
        "ops": {
            a.op.name: {"config": {"value": value}}
            for a in assets
            if "config" in a.op.ins or a.op.config_schema
        }
    }
    return dg.materialize(
        assets, resources={"io_manager": manager(root)}, run_config=config, **kwargs
    )


def test_time_window_partitions_are_replaced_exactly_and_reruns_commit_nothing(tmp_path):
    path = "my_schema/daily_partitioned"
    assert _run([daily_partitioned], tmp_path, "1", partition_key="2022-01-01").success
    assert _run([daily_partitioned], tmp_path, "2", partition_key="2022-01-02").success
    assert rows(tmp_path, path, "a") == ["1"] * 3 + ["2"] * 3
    assert _run([daily_partitioned], tmp_path, "3", partition_key="2022-01-01").success
    assert rows(tmp_path, path, "a") == ["2"] * 3 + ["3"] * 3
    versions = version(tmp_path, path)
    again = _run([daily_partitioned], tmp_path, "3", partition_key="2022-01-01")
    assert committed(again) == [False] and version(tmp_path, path) == versions


def test_a_single_run_backfill_is_one_commit_and_its_rerun_and_reruns_by_day_commit_nothing(
    tmp_path,
):
    path = "my_schema/daily_partitioned"
    ranged = dg.asset(
        partitions_def=DAILY,
        key_prefix=["my_schema"],
        name="daily_partitioned",
        metadata={"partition_expr": "time"},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )(daily_partitioned.op.compute_fn.decorated_fn)
    assert _run([ranged], tmp_path, tags=RANGE).success
    assert version(tmp_path, path) == 0 and len(rows(tmp_path, path, "a")) == 9
    again = _run([ranged], tmp_path, tags=RANGE)
    assert again.success and set(committed(again)) == {False}
    for key in ("2022-01-01", "2022-01-02", "2022-01-03"):
        assert committed(_run([ranged], tmp_path, partition_key=key)) == [False]
    assert version(tmp_path, path) == 0


def test_dagster_deltalake_fails_the_rerun_of_a_range_that_works_here(tmp_path):
    """The peer's predicate covers the window's first day only (the trap this replaces)."""
    ranged = dg.asset(
        partitions_def=DAILY,
        name="ranged",
        metadata={"partition_expr": "time"},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )(daily_partitioned.op.compute_fn.decorated_fn)
    official = DeltaLakePyarrowIOManager(
        root_uri=str(tmp_path / "peer"), storage_options=LocalConfig()
    )
    config = {"ops": {"ranged": {"config": {"value": "1"}}}}
    assert dg.materialize(
        [ranged], resources={"io_manager": official}, run_config=config, tags=RANGE
    ).success
    peer = dg.materialize(
        [ranged],
        resources={"io_manager": official},
        run_config=config,
        tags=RANGE,
        raise_on_error=False,
    )
    assert not peer.success
    ours = {"io_manager": manager(tmp_path / "ours")}
    for _ in range(2):
        assert dg.materialize([ranged], resources=ours, run_config=config, tags=RANGE).success


@pytest.mark.parametrize(
    ("partitions_def", "key", "tz"),
    [
        (dg.HourlyPartitionsDefinition(start_date="2022-01-01-00:00"), "2022-01-01-05:00", "UTC"),
        (
            dg.HourlyPartitionsDefinition(start_date="2022-01-01-00:00", timezone="Europe/Berlin"),
            "2022-01-01-05:00",
            None,
        ),
        (dg.WeeklyPartitionsDefinition(start_date="2022-01-02"), "2022-01-09", "UTC"),
        (dg.MonthlyPartitionsDefinition(start_date="2022-01-01"), "2022-02-01", "UTC"),
    ],
)
def test_every_cadence_on_a_timestamp_column(tmp_path, partitions_def, key, tz):
    @dg.asset(partitions_def=partitions_def, metadata={"partition_expr": "at"})
    def events(context: dg.AssetExecutionContext) -> pa.Table:
        window = context.partition_time_window
        inside = window.start + (window.end - window.start) / 2
        stamp = inside.astimezone(dt.UTC) if tz else inside.replace(tzinfo=None)
        return pa.table({"at": pa.array([stamp] * 2, pa.timestamp("us", tz=tz)), "n": [1, 2]})

    resources = {"io_manager": manager(tmp_path)}
    previous = partitions_def.get_prev_partition_window(
        partitions_def.time_window_for_partition_key(key).end
    )
    assert previous is not None
    first_key = partitions_def.get_partition_keys()[0]
    for partition in (first_key, key, key):
        assert dg.materialize([events], partition_key=partition, resources=resources).success
    assert version(tmp_path, "public/events") == 1  # two partitions written, one rerun free
    assert len(rows(tmp_path, "public/events", "n")) == 4


def test_weekly_partitions_on_a_date_column(tmp_path):
    weekly = dg.WeeklyPartitionsDefinition(start_date="2022-01-02")

    @dg.asset(partitions_def=weekly, metadata={"partition_expr": "day"})
    def weeks(context: dg.AssetExecutionContext) -> pa.Table:
        start = context.partition_time_window.start.date()
        return pa.table(
            {"day": [start + dt.timedelta(days=i) for i in range(7)], "n": list(range(7))}
        )

    resources = {"io_manager": manager(tmp_path)}
    for key in ("2022-01-02", "2022-01-09", "2022-01-02"):
        assert dg.materialize([weeks], partition_key=key, resources=resources).success
    assert version(tmp_path, "public/weeks") == 1
    assert len(rows(tmp_path, "public/weeks", "day")) == 14


def test_hourly_partitions_on_a_date_column_are_refused_with_the_reason(tmp_path):
    hourly = dg.HourlyPartitionsDefinition(start_date="2022-01-01-00:00")

    @dg.asset(partitions_def=hourly, metadata={"partition_expr": "day"})
    def hours() -> pa.Table:
        return pa.table({"day": [dt.date(2022, 1, 1)]})

    result = dg.materialize(
        [hours],
        partition_key="2022-01-01-01:00",
        resources={"io_manager": manager(tmp_path)},
        raise_on_error=False,
    )
    assert not result.success
    assert (
        "do not fall on whole days, but 'day' is a date column"
        in result.failure_data_for_node("hours").error.cause.message
    )


@dg.asset(partitions_def=DAILY, key_prefix=["my_schema"], metadata={"partition_expr": "time"})
def load_partitioned(context: dg.AssetExecutionContext, daily_partitioned: pa.Table) -> pa.Table:
    assert set(daily_partitioned.column("time").to_pylist()) == {_day(context.partition_key)}
    return daily_partitioned


def test_a_partitioned_input_reads_exactly_its_partition(tmp_path):
    for key, value in (("2022-01-01", "1"), ("2022-01-02", "2")):
        result = _run([daily_partitioned, load_partitioned], tmp_path, value, partition_key=key)
        assert result.success
        assert result.asset_value(["my_schema", "load_partitioned"]).num_rows == 3


@dg.asset(partitions_def=COLORS, key_prefix=["my_schema"], metadata={"partition_expr": "color"})
def static_partitioned(context: dg.AssetExecutionContext, config: Value) -> pa.Table:
    return pa.table({"color": [context.partition_key] * 3, "a": [config.value] * 3})


def test_static_partitions(tmp_path):
    path = "my_schema/static_partitioned"
    for key, value in (("red", "1"), ("blue", "2"), ("red", "3")):
        assert _run([static_partitioned], tmp_path, value, partition_key=key).success
    assert rows(tmp_path, path, "a") == ["2"] * 3 + ["3"] * 3
    before = version(tmp_path, path)
    assert committed(_run([static_partitioned], tmp_path, "3", partition_key="red")) == [False]
    assert version(tmp_path, path) == before


MULTI = dg.MultiPartitionsDefinition({"time": DAILY, "color": COLORS})


@dg.asset(
    partitions_def=MULTI,
    key_prefix=["my_schema"],
    metadata={"partition_expr": {"time": "time", "color": "color"}},
)
def multi_partitioned(context: dg.AssetExecutionContext, config: Value) -> pa.Table:
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return pa.table(
        {"color": [keys["color"]] * 3, "time": [_day(keys["time"])] * 3, "a": [config.value] * 3}
    )


def test_multi_partitions_time_by_static(tmp_path):
    path = "my_schema/multi_partitioned"
    steps = [
        ({"time": "2022-01-01", "color": "red"}, "1"),
        ({"time": "2022-01-01", "color": "blue"}, "2"),
        ({"time": "2022-01-02", "color": "red"}, "3"),
        ({"time": "2022-01-01", "color": "red"}, "4"),
    ]
    for key, value in steps:
        assert _run(
            [multi_partitioned], tmp_path, value, partition_key=dg.MultiPartitionKey(key)
        ).success
    assert rows(tmp_path, path, "a") == ["2"] * 3 + ["3"] * 3 + ["4"] * 3
    before = version(tmp_path, path)
    again = _run(
        [multi_partitioned],
        tmp_path,
        "4",
        partition_key=dg.MultiPartitionKey({"time": "2022-01-01", "color": "red"}),
    )
    assert committed(again) == [False] and version(tmp_path, path) == before


FRUITS = dg.DynamicPartitionsDefinition(name="fruits")


@dg.asset(partitions_def=FRUITS, key_prefix=["my_schema"], metadata={"partition_expr": "fruit"})
def dynamic_partitioned(context: dg.AssetExecutionContext, config: Value) -> pa.Table:
    return pa.table({"fruit": [context.partition_key] * 3, "a": [config.value] * 3})


def test_dynamic_partitions_including_keys_that_look_like_sql(tmp_path):
    path = "my_schema/dynamic_partitioned"
    hostile = "o'brien') OR (1=1"
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("fruits", ["apple", "orange", hostile])
        for key, value in (("apple", "1"), ("orange", "2"), (hostile, "3"), ("apple", "4")):
            assert _run(
                [dynamic_partitioned], tmp_path, value, partition_key=key, instance=instance
            ).success
        stored = read_rows(table(tmp_path, path)).to_pylist()
        by_fruit = {}
        for row in stored:
            by_fruit.setdefault(row["fruit"], set()).add(row["a"])
        assert by_fruit == {"apple": {"4"}, "orange": {"2"}, hostile: {"3"}}
        assert committed(
            _run([dynamic_partitioned], tmp_path, "3", partition_key=hostile, instance=instance)
        ) == [False]


def test_a_self_dependent_asset_reads_yesterday_from_its_first_partition_on(tmp_path):
    days = dg.DailyPartitionsDefinition(start_date="2023-01-01")
    seen = {}

    @dg.asset(
        partitions_def=days,
        key_prefix=["my_schema"],
        metadata={"partition_expr": "key"},
        ins={
            "running": dg.AssetIn(
                key=dg.AssetKey(["my_schema", "running"]),
                partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1),
            )
        },
    )
    def running(context: dg.AssetExecutionContext, running: pa.Table) -> pa.Table:
        seen[context.partition_key] = running.num_rows
        total = sum(running.column("total").to_pylist()) if running.num_rows else 0
        return pa.table({"key": [_day(context.partition_key)], "total": [total + 1]})

    resources = {"io_manager": manager(tmp_path)}
    for key in ("2023-01-01", "2023-01-02", "2023-01-03", "2023-01-02"):
        assert dg.materialize([running], partition_key=key, resources=resources).success
    assert seen == {"2023-01-01": 0, "2023-01-02": 1, "2023-01-03": 1}
    assert rows(tmp_path, "my_schema/running", "total") == [1, 2, 3]


def test_a_window_mapping_loads_exactly_the_mapped_days(tmp_path):
    @dg.asset(
        partitions_def=DAILY,
        metadata={"partition_expr": "time"},
        ins={
            "daily_partitioned": dg.AssetIn(
                key=dg.AssetKey(["my_schema", "daily_partitioned"]),
                partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-2),
            )
        },
    )
    def three_days(context: dg.AssetExecutionContext, daily_partitioned: pa.Table) -> pa.Table:
        days = sorted(set(daily_partitioned.column("time").to_pylist()))
        assert days == [_day(context.partition_key) - dt.timedelta(days=i) for i in (2, 1, 0)]
        return pa.table({"time": [_day(context.partition_key)], "days": [len(days)]})

    for key in ("2022-01-01", "2022-01-02", "2022-01-03"):
        assert _run([daily_partitioned], tmp_path, partition_key=key).success
    result = dg.materialize(
        [daily_partitioned, three_days],
        partition_key="2022-01-03",
        selection=[three_days],
        resources={"io_manager": manager(tmp_path)},
    )
    assert result.success


def test_several_static_keys_in_one_run_are_one_commit(tmp_path):
    @dg.asset(
        partitions_def=COLORS,
        key_prefix=["my_schema"],
        name="static_partitioned",
        metadata={"partition_expr": "color"},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def both(context: dg.AssetExecutionContext) -> pa.Table:
        keys = context.partition_keys
        return pa.table({"color": [k for k in keys for _ in "ab"], "a": ["x"] * 2 * len(keys)})

    tags = {
        "dagster/asset_partition_range_start": "red",
        "dagster/asset_partition_range_end": "yellow",
    }
    resources = {"io_manager": manager(tmp_path)}
    assert dg.materialize([both], resources=resources, tags=tags).success
    path = "my_schema/static_partitioned"
    assert rows(tmp_path, path, "color") == ["red", "red", "yellow", "yellow"]
    assert version(tmp_path, path) == 0
    again = dg.materialize([both], resources=resources, tags=tags)
    assert set(committed(again)) == {False} and version(tmp_path, path) == 0
