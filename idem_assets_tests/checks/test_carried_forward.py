"""Reruns proven, not recomputed: a day's check results stand while what they read stands.

A result is carried forward (reported again for the new materialization, with the run that
evaluated it and what proved it) only while the check's definition, the day's landing
files and the table files it read are unchanged; anything else recomputes it.
"""

from __future__ import annotations

from collections import Counter

import dagster as dg

from idem_assets_tests.harness import day_keys, new_project

DAYS = 5
LANDING_CHECKS = {"rerun_equality", "conservation", "quarantine_share"}


def _evaluations(result: dg.ExecuteInProcessResult, asset: str) -> dict[tuple[str, str], dict]:
    """(check, partition) -> metadata values of each evaluation of ``asset`` in the run."""
    return {
        (e.check_name, str(e.partition)): {k: getattr(v, "value", v) for k, v in e.metadata.items()}
        for e in result.get_asset_check_evaluations()
        if e.asset_key == dg.AssetKey(asset)
    }


def _carried(evaluations: dict[tuple[str, str], dict]) -> dict[tuple[str, str], bool]:
    return {key: bool(meta["carried_forward"]) for key, meta in evaluations.items()}


def test_an_unchanged_rerun_carries_every_landing_result_forward(tmp_path):
    project = new_project(tmp_path, days=DAYS)
    keys = day_keys(DAYS)
    first = project.run_days(keys[0], keys[-1])
    assert first.success
    for asset in ("orders", "customers", "events"):
        assert not any(_carried(_evaluations(first, asset)).values()), asset

    again = project.run_days(keys[0], keys[-1])
    assert again.success
    for asset in ("orders", "customers", "events"):
        evaluations = _evaluations(again, asset)
        assert len(evaluations) == len(_evaluations(first, asset))
        assert all(_carried(evaluations).values()), asset
        for meta in evaluations.values():
            assert meta["evaluated_in_run"] == first.run_id
            assert "inputs" in meta["proven_by"] or "table" in meta["proven_by"]
    # The same verdicts as the first run's: a carried result is the result, not a pass.
    assert {
        (e.asset_key, e.check_name, e.partition, e.passed, e.severity)
        for e in again.get_asset_check_evaluations()
    } == {
        (e.asset_key, e.check_name, e.partition, e.passed, e.severity)
        for e in first.get_asset_check_evaluations()
    }
    # daily_sales has no landing files: its rerun equality reads orders, and is recomputed.
    sales = _carried(_evaluations(again, "daily_sales"))
    assert not any(carried for (check, _), carried in sales.items() if check == "rerun_equality")


def test_a_changed_day_recomputes_that_day_and_the_whole_table_checks(tmp_path):
    project = new_project(tmp_path, days=DAYS)
    keys = day_keys(DAYS)
    first = project.run_days(keys[0], keys[-1])
    assert first.success
    changed = keys[2]
    late = project.landing / "orders" / f"date={changed}" / "zz-late.csv"
    late.write_text(
        "order_id,customer_id,amount,status,order_date,updated_at\n"
        f"99999991,1,5.00,paid,{changed},{changed}T23:00:00Z\n"
    )
    rerun = project.run_days(keys[0], keys[-1], assets=["orders"])
    assert rerun.success
    evaluations = _evaluations(rerun, "orders")
    carried = _carried(evaluations)
    recomputed = Counter(check for (check, day), c in carried.items() if not c and day != changed)
    # Days whose files did not change keep their landing results...
    assert not any(recomputed[check] for check in LANDING_CHECKS), recomputed
    # ...the changed day's are recomputed, and so is every day's unique-key check: it
    # reads the whole table, which this run changed.
    assert all(not carried[(check, changed)] for check in LANDING_CHECKS)
    assert all(not c for (check, _), c in carried.items() if check == "unique_natural_key")
    before = _evaluations(first, "orders")[("conservation", changed)]
    after = evaluations[("conservation", changed)]
    assert (after["raw_rows"], after["unaccounted"]) == (before["raw_rows"] + 1, 0)


def test_a_read_is_shared_within_a_step_only_while_no_file_changed(tmp_path):
    """The checks of a materializing step judge the rows its write read, not a second read
    of the same bytes; a file changed in between is read again, never judged stale."""
    from idem_assets.defs.sales.orders import ORDERS_TABLE
    from idem_assets.io_manager import Window
    from idem_assets.lib.landing_io import read_landing, shared_landing_reads
    from idem_assets_tests.harness import START

    project = new_project(tmp_path, days=2)
    contract = ORDERS_TABLE.landing_source
    assert contract is not None
    window = Window.day(START)
    with shared_landing_reads():
        first = read_landing(project.lake, contract, window)
        assert read_landing(project.lake, contract, window) is first
        late = project.landing / "orders" / f"date={START}" / "zz-late.csv"
        late.write_text(
            "order_id,customer_id,amount,status,order_date,updated_at\n"
            f"99999992,1,5.00,paid,{START},{START}T23:00:00Z\n"
        )
        again = read_landing(project.lake, contract, window)
    assert again is not first
    assert again.raw_rows == first.raw_rows + 1
    # Outside a step nothing is shared.
    assert read_landing(project.lake, contract, window) is not again
