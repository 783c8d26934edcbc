"""Time partitions on a text or integer column, as dagster-delta takes them.

A column holding each partition's start spelled in a format (``2024-03-01``, ``20240301``,
``01/03/2024``) is replaced exactly, by typed predicates (``day IN ('2024-03-01', ...)``,
never text built from input); the format is the partitions definition's ``fmt`` or the
asset's ``partition_format`` metadata. A column spelled otherwise, or of another type, is
refused by name with nothing written.
"""

import datetime as dt

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets.io_manager.slices import PartitionSliceError, time_condition
from idem_assets.lake import read_rows
from idem_assets.lake.predicates import In
from idem_assets_tests.io_manager.dropin import committed, manager, rows, version

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")
RANGE = {
    "dagster/asset_partition_range_start": "2024-02-28",
    "dagster/asset_partition_range_end": "2024-03-02",
}


class Value(dg.Config):
    value: str = "1"


def _days(context: dg.AssetExecutionContext) -> list[dt.date]:
    window = context.partition_time_window
    return [
        window.start.date() + dt.timedelta(days=i) for i in range((window.end - window.start).days)
    ]


def _asset(partitions_def, spell, kind=None, **metadata):
    kind = kind or pa.string()

    @dg.asset(
        name="sales",
        partitions_def=partitions_def,
        metadata={"partition_expr": "day", **metadata},
    )
    def sales(context: dg.AssetExecutionContext, config: Value) -> pa.Table:
        days = _days(context)
        return pa.table(
            {
                "day": pa.array([spell(d) for d in days for _ in range(2)], kind),
                "n": [1, 2] * len(days),
                "v": [config.value] * 2 * len(days),
            }
        )

    return sales


def _run(asset, root, value="1", **kwargs):
    return dg.materialize(
        [asset],
        resources={"io_manager": manager(root)},
        run_config={"ops": {"sales": {"config": {"value": value}}}},
        raise_on_error=False,
        **kwargs,
    )


def _by_day(root) -> dict:
    days = rows(root, "public/sales", "day")
    return {day: days.count(day) for day in days}


@pytest.mark.parametrize(
    ("partitions_def", "spell", "kind", "metadata"),
    [
        (DAILY, dt.date.isoformat, pa.string(), {}),  # the definition's %Y-%m-%d
        (DAILY, dt.date.isoformat, pa.large_string(), {}),
        (
            dg.DailyPartitionsDefinition(start_date="20240101", fmt="%Y%m%d"),
            lambda d: d.strftime("%Y%m%d"),
            pa.string(),
            {},
        ),
        (DAILY, lambda d: int(d.strftime("%Y%m%d")), pa.int64(), {"partition_format": "%Y%m%d"}),
        # Not sortable as text: a range is the set of its days, never a text comparison.
        (DAILY, lambda d: d.strftime("%d/%m/%Y"), pa.string(), {"partition_format": "%d/%m/%Y"}),
    ],
    ids=["iso-text", "iso-large-text", "definition-fmt", "integer", "day-first"],
)
def test_a_text_or_integer_day_column_is_replaced_exactly(
    tmp_path, partitions_def, spell, kind, metadata
):
    asset = _asset(partitions_def, spell, kind, **metadata)
    key = partitions_def.get_partition_key_for_timestamp(
        dt.datetime(2024, 2, 28, tzinfo=dt.UTC).timestamp()
    )
    day = dt.date(2024, 2, 28)
    # A range across a month end, in one run: one commit of 4 days.
    ranged = {
        "dagster/asset_partition_range_start": key,
        "dagster/asset_partition_range_end": partitions_def.get_partition_key_for_timestamp(
            dt.datetime(2024, 3, 2, tzinfo=dt.UTC).timestamp()
        ),
    }
    assert _run(asset, tmp_path, "1", tags=ranged).success
    assert version(tmp_path, "public/sales") == 0
    every = [spell(day + dt.timedelta(days=i)) for i in range(4)]
    assert _by_day(tmp_path) == dict.fromkeys(every, 2)
    # One day again with other values: only that day's rows change.
    assert _run(asset, tmp_path, "2", partition_key=key).success
    assert sorted(rows(tmp_path, "public/sales", "v")) == ["1"] * 6 + ["2"] * 2
    assert _by_day(tmp_path) == dict.fromkeys(every, 2)
    # Unchanged reruns, by day and as the range, commit nothing.
    before = version(tmp_path, "public/sales")
    assert committed(_run(asset, tmp_path, "2", partition_key=key)) == [False]
    assert version(tmp_path, "public/sales") == before


def test_a_partitioned_input_reads_its_days_from_a_text_column(tmp_path):
    sales = _asset(DAILY, dt.date.isoformat)

    @dg.asset(partitions_def=DAILY, metadata={"partition_expr": "day"})
    def totals(context: dg.AssetExecutionContext, sales: pa.Table) -> pa.Table:
        keys = list(context.partition_keys)
        assert set(sales.column("day").to_pylist()) == set(keys)
        per_day = {key: 0 for key in keys}
        for day, n in zip(
            sales.column("day").to_pylist(), sales.column("n").to_pylist(), strict=True
        ):
            per_day[day] += n
        return pa.table({"day": keys, "n": [per_day[key] for key in keys]})

    resources = {"io_manager": manager(tmp_path)}
    config = {"ops": {"sales": {"config": {"value": "1"}}}}
    assert dg.materialize(
        [sales, totals], resources=resources, run_config=config, tags=RANGE
    ).success
    for key in ("2024-02-29", "2024-03-01"):
        result = dg.materialize(
            [sales, totals], resources=resources, run_config=config, partition_key=key
        )
        assert result.success
    assert rows(tmp_path, "public/totals", "n") == [3, 3, 3, 3]


def test_a_column_spelled_otherwise_is_refused_by_name_with_nothing_written(tmp_path):
    asset = _asset(DAILY, lambda d: d.strftime("%d.%m.%Y"))  # the definition says %Y-%m-%d
    result = _run(asset, tmp_path, partition_key="2024-03-01")
    assert not result.success
    message = result.failure_data_for_node("sales").error.cause.message
    assert "2 row(s) have day not one of the run's 1 partition(s) spelled '%Y-%m-%d'" in message
    assert "'01.03.2024'" in message and "nothing was written" in message
    assert not (tmp_path / "public" / "sales" / "_delta_log").exists()


def test_a_day_column_of_another_type_is_refused_by_name(tmp_path):
    asset = _asset(DAILY, lambda d: float(d.day), pa.float64())
    result = _run(asset, tmp_path, partition_key="2024-03-01")
    assert not result.success
    message = result.failure_data_for_node("sales").error.cause.message
    assert "need a date, timestamp, text or integer column; 'day' is double" in message


def test_an_integer_column_needs_a_format_of_digits():
    window = DAILY.time_window_for_partition_key("2024-03-01")
    with pytest.raises(PartitionSliceError, match="set the output's partition_format"):
        time_condition("day", window, pa.int32(), DAILY)


def test_an_hourly_range_on_a_text_column_is_every_hour_spelled():
    hourly = dg.HourlyPartitionsDefinition(start_date="2024-01-01-00:00")
    window = dg.TimeWindow(
        dt.datetime(2024, 3, 1, 22, tzinfo=dt.UTC), dt.datetime(2024, 3, 2, 2, tzinfo=dt.UTC)
    )
    condition = time_condition("hour", window, pa.string(), hourly)
    assert isinstance(condition, In)
    assert condition.values == (
        "2024-03-01-22:00",
        "2024-03-01-23:00",
        "2024-03-02-00:00",
        "2024-03-02-01:00",
    )
    # Rendered with its quotes doubled by the one text literal rule, never from raw input.
    assert condition.sql().startswith("\"hour\" IN ('2024-03-01-22:00', ")


@pytest.mark.parametrize(
    ("partitions_def", "spell"),
    [
        (DAILY, dt.date.isoformat),
        (
            dg.DailyPartitionsDefinition(start_date="20240101", fmt="%Y%m%d"),
            lambda d: d.strftime("%Y%m%d"),
        ),
    ],
    ids=["iso-text", "definition-fmt"],
)
def test_stores_what_dagster_delta_stores_for_the_same_runs(tmp_path, partitions_def, spell):
    import dagster_delta as dd

    asset = _asset(partitions_def, spell)
    keys = partitions_def.get_partition_keys()[58:62]  # 2024-02-28 .. 2024-03-02
    tables = {}
    for name, io_manager in (
        ("ours", manager(tmp_path / "ours")),
        (
            "theirs",
            dd.DeltaLakePyarrowIOManager(
                root_uri=str(tmp_path / "theirs"), storage_options=dd.LocalConfig()
            ),
        ),
    ):
        for key, value in [(k, "1") for k in keys] + [(keys[1], "2")]:
            result = dg.materialize(
                [asset],
                resources={"io_manager": io_manager},
                run_config={"ops": {"sales": {"config": {"value": value}}}},
                partition_key=key,
            )
            assert result.success, name
        stored = read_rows(DeltaTable(str(tmp_path / name / "public" / "sales")))
        tables[name] = sorted(stored.select(["day", "n", "v"]).to_pylist(), key=str)
    assert tables["ours"] == tables["theirs"]
    assert sum(row["v"] == "2" for row in tables["ours"]) == 2
