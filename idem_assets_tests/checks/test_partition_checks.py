"""Check results per partition: one evaluation per (check, day), from the asset's own step."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from deltalake import write_deltalake

from idem_assets.lake import read_rows
from idem_assets.lake.predicates import conjunction, date_range
from idem_assets_tests.harness import day_keys, new_project

ORDERS = dg.AssetKey("orders")
CHECKS = ("rerun_equality", "unique_natural_key", "conservation", "quarantine_share")


def _by_check(result: dg.ExecuteInProcessResult, asset: dg.AssetKey) -> dict[str, dict]:
    """check -> {partition: evaluation} of a run."""
    out: dict[str, dict] = {}
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.asset_key == asset:
            out.setdefault(evaluation.check_name, {})[evaluation.partition] = evaluation
    return out


def _history(instance: dg.DagsterInstance, asset: dg.AssetKey, check: str) -> list:
    return instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(asset, check), limit=100
    )


def _checks_only(project, keys: list[str]) -> dg.ExecuteInProcessResult:
    """Run the checks of orders alone (what "Execute checks" does) over a range."""
    definitions = project.definitions()
    job = dg.define_asset_job(
        "orders_checks", selection=dg.AssetSelection.checks_for_assets(ORDERS)
    )
    merged = dg.Definitions.merge(definitions, dg.Definitions(jobs=[job]))
    tags = {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }
    return merged.resolve_job_def("orders_checks").execute_in_process(
        instance=project.instance, tags=tags, raise_on_error=False
    )


def test_a_backfill_range_reports_every_check_for_every_day(tmp_path):
    project = new_project(tmp_path, days=3)
    keys = day_keys(3)
    result = project.run_days(keys[0], keys[-1])
    assert result.success
    checks = _by_check(result, ORDERS)
    for name in CHECKS:
        assert sorted(checks[name]) == keys, name
        assert all(e.passed for e in checks[name].values()), name
    # Each evaluation names the materialization it checked: that day's, of this run.
    targets = {
        e.partition: e.target_materialization_data for e in checks["rerun_equality"].values()
    }
    assert all(t is not None and t.run_id == result.run_id for t in targets.values()), targets
    # The metadata is the day's own: its range and rows.
    day = checks["rerun_equality"][keys[1]]
    assert day.metadata["partition_range"].value == f"[{keys[1]}, {day_keys(3)[2]})"
    stored = read_rows(project.lake.table("orders").open())
    on_day = pc.sum(
        pc.equal(stored.column("order_date"), pa.scalar(dt.date.fromisoformat(keys[1])))
    ).as_py()
    assert day.metadata["stored_rows"].value == on_day
    # Each check has one execution record per day, none left PLANNED.
    for name in CHECKS:
        records = _history(project.instance, ORDERS, name)
        assert sorted(r.partition for r in records) == keys, name
        assert {r.status for r in records} == {AssetCheckExecutionRecordStatus.SUCCEEDED}
    # Downstream assets report per day too; an unpartitioned one reports once.
    sales = _by_check(result, dg.AssetKey("daily_sales"))
    assert sorted(sales["reconciles_with_orders"]) == keys


def test_a_row_changed_behind_the_lake_turns_only_its_day_red(tmp_path):
    project = new_project(tmp_path, days=3)
    keys = day_keys(3)
    first = project.run_days(keys[0], keys[-1])
    assert first.success
    table = project.lake.table("orders").open()
    version = table.version()
    # One order of the middle day gets another amount, written with delta-rs directly.
    middle = date_range(
        "order_date", dt.date.fromisoformat(keys[1]), dt.date.fromisoformat(keys[2])
    )
    rows = read_rows(table, ranges=[middle])
    amounts = rows.column("amount").to_pylist()
    amounts[0] = amounts[0] + 1
    changed = rows.set_column(
        rows.schema.get_field_index("amount"),
        "amount",
        pa.array(amounts, rows.schema.field("amount").type),
    )
    write_deltalake(table, changed, mode="overwrite", predicate=conjunction([middle]))

    result = _checks_only(project, keys)
    # orders' checks are blocking (defs/orders/defs.yaml): the red day fails the run.
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    assert error is not None and "orders: rerun_equality" in error.message
    assert not result.get_asset_materialization_events()  # checks only: nothing written
    assert project.lake.table("orders").open().version() == version + 1
    equality = _by_check(result, ORDERS)["rerun_equality"]
    assert sorted(equality) == keys
    assert [equality[k].passed for k in keys] == [True, False, True]
    # The untouched days are proven unchanged and carried; the changed one is recomputed.
    carried = [equality[k].metadata["carried_forward"].value for k in keys]
    assert carried == [True, False, True]
    # A checks-only run checks what the last materializing run stored.
    assert {e.target_materialization_data.run_id for e in equality.values()} == {first.run_id}
    bad = equality[keys[1]]
    # The changed row as stored and as a clean rerun computes it: two rows differ.
    assert bad.metadata["rows_differing"].value == 2
    assert keys[1] in bad.description
    records = _history(project.instance, ORDERS, "rerun_equality")
    latest = {}
    for record in sorted(records, key=lambda r: r.id):  # insert order; timestamps can tie
        latest[record.partition] = record.status
    assert latest == {
        keys[0]: AssetCheckExecutionRecordStatus.SUCCEEDED,
        keys[1]: AssetCheckExecutionRecordStatus.FAILED,
        keys[2]: AssetCheckExecutionRecordStatus.SUCCEEDED,
    }


def test_an_unpartitioned_asset_reports_one_result(tmp_path):
    project = new_project(tmp_path, days=1)
    result = project.run_catalog()
    assert result.success
    catalog = dg.AssetKey("product_catalog")
    checks = _by_check(result, catalog)
    assert set(checks["rerun_equality"]) == {None}
    assert checks["rerun_equality"][None].passed
    assert project.run_catalog().success
    # One execution per run, none left PLANNED beside it.
    records = _history(project.instance, catalog, "rerun_equality")
    assert [r.status for r in records] == [AssetCheckExecutionRecordStatus.SUCCEEDED] * 2


def test_a_key_stored_on_two_days_fails_unique_natural_key_on_both_days_only(tmp_path):
    project = new_project(tmp_path, days=3)
    keys = day_keys(3)
    assert project.run_days(keys[0], keys[-1]).success
    table = project.lake.table("orders").open()
    first = date_range("order_date", dt.date.fromisoformat(keys[0]), dt.date.fromisoformat(keys[1]))
    row = read_rows(table, ranges=[first]).slice(0, 1)
    # The same order again, on the last day: appended with delta-rs behind the lake's back.
    moved = row.set_column(
        row.schema.get_field_index("order_date"),
        "order_date",
        pa.array([dt.date.fromisoformat(keys[2])], row.schema.field("order_date").type),
    )
    write_deltalake(table, moved, mode="append")

    result = _checks_only(project, keys)
    assert not result.success  # orders' checks are blocking
    unique = _by_check(result, ORDERS)["unique_natural_key"]
    assert sorted(unique) == keys
    assert [unique[k].passed for k in keys] == [False, True, False]
    for day in (keys[0], keys[2]):
        metadata = unique[day].metadata
        assert metadata["duplicated_keys"].value == 1
        assert metadata["surplus_rows"].value == 1
        sample = metadata["sample"].value
        assert sample == [{"order_id": row.column("order_id")[0].as_py(), "len": 2}]
