"""Reference tests: the patterns the project replaces really do damage on a rerun."""

import sqlite3

from deltalake import write_deltalake

from idem_assets.lake import LakeTable, read_rows
from idem_assets.landing.reader import read_days
from idem_assets.sample.sources import ORDERS
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
        db.execute(
            "INSERT INTO daily_sales VALUES (?, ?, ?)", (START.isoformat(), len(rows), str(total))
        )
    count = db.execute(
        "SELECT count(*) FROM daily_sales WHERE order_date = ?", (START.isoformat(),)
    ).fetchone()[0]
    assert count == 2  # the day now reports double revenue

    for _ in range(2):
        assert project.run_days(START.isoformat()).success
    sales = [r for r in project.table_rows("daily_sales") if r["order_date"] == START]
    assert len(sales) == 1


def test_unkeyed_sends_deliver_twice_on_retry_keyed_outbox_once(tmp_path):
    """A send loop that mints a new key per attempt turns a retry into a second delivery."""
    import uuid

    from idem_assets.checkpoint import open_store
    from idem_assets.notify import NotificationClient, NotificationServer, idempotency_key
    from idem_assets.notify.outbox import OutboxRecord, drain, register

    with NotificationServer(tmp_path / "notify.db", "tok-wrong-patterns") as server:
        client = NotificationClient(server.url, "tok-wrong-patterns")
        records = [{"order_id": i} for i in range(5)]
        for _ in range(2):  # the batch "failed" after sending and is retried
            for payload in records:
                client.send(uuid.uuid4().hex, {"naive": True, **payload})
        naive = client.stats()["deliveries"]
        with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
            keyed = [
                OutboxRecord(f"o{i}", idempotency_key("ref", i), {"order_id": i}) for i in range(5)
            ]
            for _ in range(2):
                register(store, "ref", keyed, max_attempts=3)
                drain(store, "ref", client, owner="t", lease_seconds=30, batch_size=10)
        assert naive == 10  # every record delivered twice
        assert client.stats()["deliveries"] - naive == 5  # the outbox: once each


def test_hand_made_upsert_lets_a_late_older_change_win(tmp_path):
    """INSERT OR REPLACE without a version guard: the last arrival wins, not the newest."""
    from idem_assets.lake import LakeTable, merge_upsert
    from idem_assets.sample.sources import CUSTOMERS
    from idem_assets_tests.lake.rows import customer, customers_table

    newer = customer(1, "newest", "2024-03-05T00:00:00")
    older = customer(1, "stale", "2024-03-01T00:00:00")
    db = sqlite3.connect(tmp_path / "naive.db")
    db.execute("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT)")
    for row in (newer, older):  # the older change arrives late
        db.execute(
            "INSERT OR REPLACE INTO customers VALUES (?, ?)", (row["customer_id"], row["name"])
        )
    assert db.execute("SELECT name FROM customers").fetchone()[0] == "stale"

    target = LakeTable(str(tmp_path / "customers"))
    for row in (newer, older):
        merge_upsert(
            target,
            customers_table([row]),
            ["customer_id"],
            version_column="updated_at",
            schema=CUSTOMERS.schema,
        )
    assert [r["name"] for r in read_rows(target.open()).to_pylist()] == ["newest"]


def test_loading_raw_rows_as_they_come_keeps_redeliveries(project, tmp_path):
    """The landing day holds re-delivered orders; loading them raw duplicates order ids."""
    rows = read_days(project.landing, ORDERS, START, START.replace(day=2)).rows
    uri = str(tmp_path / "raw_orders")
    write_deltalake(uri, rows)
    raw_ids = read_rows(LakeTable(uri).open()).column("order_id").to_pylist()
    assert len(raw_ids) > len(set(raw_ids))  # the generator re-delivers ~10% of orders

    assert project.run_days(START.isoformat()).success
    stored = [r["order_id"] for r in project.table_rows("orders")]
    assert len(stored) == len(set(stored)) == len(set(raw_ids))
