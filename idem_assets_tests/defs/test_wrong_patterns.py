"""Reference tests: the patterns the project replaces really do damage on a rerun."""

import sqlite3

from deltalake import write_deltalake

from idem_assets.lake import LakeTable, read_rows
from idem_assets.landing.contract import ORDERS
from idem_assets.landing.reader import read_days
from idem_assets_tests.harness import START, materialization_metadata


def test_plain_append_of_a_day_duplicates_it_on_retry(project, tmp_path):
    rows = read_days(project.landing, ORDERS, START, START.replace(day=2)).rows
    uri = str(tmp_path / "appended_orders")
    for _ in range(2):  # the first attempt "failed" after writing; the retry appends again
        write_deltalake(uri, rows, mode="append")
    appended = read_rows(LakeTable(uri).open())
    assert appended.num_rows == 2 * rows.num_rows

    # The same retry through the project's orders asset leaves one copy.
    first, retry = project.run_days(START.isoformat()), project.run_days(START.isoformat())
    assert first.success and retry.success
    stored = project.table_rows("orders")
    assert len(stored) == len({r["order_id"] for r in stored})
    assert len(stored) == materialization_metadata(first)["orders"]["dagster/row_count"]


def test_insert_of_an_aggregate_per_run_duplicates_the_day(project, tmp_path):
    rows = read_days(project.landing, ORDERS, START, START.replace(day=2)).rows.to_pylist()
    db = sqlite3.connect(tmp_path / "naive.db")
    db.execute("CREATE TABLE daily_sales (order_date TEXT, orders INTEGER, revenue TEXT)")
    for _ in range(2):  # a rerun of the day
        total = sum(r["amount"] for r in rows if r["status"] not in ("cancelled", "refunded"))
        db.execute("INSERT INTO daily_sales VALUES (?, ?, ?)",
                   (START.isoformat(), len(rows), str(total)))
    count = db.execute("SELECT count(*) FROM daily_sales WHERE order_date = ?",
                       (START.isoformat(),)).fetchone()[0]
    assert count == 2  # the day now reports double revenue

    for _ in range(2):
        assert project.run_days(START.isoformat()).success
    sales = [r for r in project.table_rows("daily_sales") if r["order_date"] == START]
    assert len(sales) == 1
