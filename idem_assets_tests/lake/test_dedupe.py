"""Dedupe keeps the newest row per key, the same row whatever the input order."""

import itertools

import pyarrow as pa

from idem_assets.lake import dedupe_newest, fingerprint
from idem_assets_tests.lake.rows import order, orders_table


def test_newest_version_wins_and_drops_are_counted():
    rows = orders_table(
        [
            order(1, "2024-03-01", "placed", updated="2024-03-01T08:00:00"),
            order(1, "2024-03-01", "shipped", updated="2024-03-01T12:00:00"),
            order(1, "2024-03-01", "paid", updated="2024-03-01T10:00:00"),
            order(2, "2024-03-01", "placed"),
        ]
    )
    result = dedupe_newest(rows, ["order_id"], "updated_at")
    kept = {r["order_id"]: r["status"] for r in result.rows.to_pylist()}
    assert kept == {1: "shipped", 2: "placed"}
    assert result.duplicates_dropped == 2
    assert result.conflicting_keys == 0


def test_equal_versions_with_different_content_break_ties_by_content_in_any_order():
    a = order(7, "2024-03-01", "paid", amount="10.00", updated="2024-03-01T09:00:00")
    b = order(7, "2024-03-01", "paid", amount="12.00", updated="2024-03-01T09:00:00")
    c = order(7, "2024-03-01", "placed", amount="12.00", updated="2024-03-01T07:00:00")
    survivors = set()
    for perm in itertools.permutations([a, b, c]):
        result = dedupe_newest(orders_table(list(perm)), ["order_id"], "updated_at")
        assert result.rows.num_rows == 1
        assert result.conflicting_keys == 1
        survivors.add(str(result.rows.to_pylist()[0]["amount"]))
    assert len(survivors) == 1  # the same row wins every time


def test_exact_duplicates_are_not_conflicts():
    row = order(3, "2024-03-01")
    result = dedupe_newest(orders_table([row, row, row]), ["order_id"], "updated_at")
    assert result.rows.num_rows == 1
    assert result.duplicates_dropped == 2
    assert result.conflicting_keys == 0


def test_output_is_sorted_and_independent_of_input_order():
    rows = orders_table(
        [order(i % 17, "2024-03-01", updated=f"2024-03-01T{i % 24:02d}:00:00") for i in range(60)]
    )
    forward = dedupe_newest(rows, ["order_id"], "updated_at")
    backward = dedupe_newest(rows.take(pa.array(range(59, -1, -1))), ["order_id"], "updated_at")
    assert forward.rows.equals(backward.rows)
    assert forward.rows.column("order_id").to_pylist() == list(range(17))
    assert fingerprint(forward.rows) == fingerprint(backward.rows)


def test_without_version_column_identical_keys_keep_one_deterministic_row():
    rows = orders_table([order(1, "2024-03-01", "paid"), order(1, "2024-03-01", "placed")])
    first = dedupe_newest(rows, ["order_id"], None)
    second = dedupe_newest(rows.take([1, 0]), ["order_id"], None)
    assert first.rows.equals(second.rows)
    assert first.duplicates_dropped == 1


def test_empty_input():
    result = dedupe_newest(orders_table([]), ["order_id"], "updated_at")
    assert result.rows.num_rows == 0 and result.duplicates_dropped == 0
