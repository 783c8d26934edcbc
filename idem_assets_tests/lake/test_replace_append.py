"""Atomic full replace and exactly-once txn appends."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets.lake import LakeTable, append_exactly_once, read_rows, replace_table
from idem_assets_tests.lake.rows import order, orders_table


def _catalog(prices: dict[int, str]) -> pa.Table:
    return pa.table(
        {
            "product_id": pa.array(list(prices), pa.int64()),
            "price": pa.array(
                [__import__("decimal").Decimal(p) for p in prices.values()], pa.decimal128(18, 2)
            ),
        }
    )


def test_replace_swaps_content_in_one_commit_and_skips_unchanged(tmp_path):
    target = LakeTable(str(tmp_path / "catalog"))
    first = replace_table(target, _catalog({1: "1.00", 2: "2.00"}))
    same = replace_table(target, _catalog({2: "2.00", 1: "1.00"}))
    new = replace_table(target, _catalog({3: "3.00"}))
    assert (first.version, same.committed, new.version) == (0, False, 1)
    assert read_rows(target.open()).column("product_id").to_pylist() == [3]
    # Time travel shows the previous version intact: one commit swapped it.
    previous = read_rows(DeltaTable(target.uri, version=0))
    assert sorted(previous.column("product_id").to_pylist()) == [1, 2]


def test_replace_refuses_an_empty_snapshot_and_keeps_the_table(tmp_path):
    target = LakeTable(str(tmp_path / "catalog"))
    replace_table(target, _catalog({1: "1.00"}))
    with pytest.raises(ValueError, match="refusing to replace"):
        replace_table(target, _catalog({}))
    assert read_rows(target.open()).num_rows == 1
    assert replace_table(target, _catalog({}), allow_empty=True).committed


def test_append_with_txn_skips_a_replayed_batch(tmp_path):
    target = LakeTable(str(tmp_path / "stream"))
    batch0 = orders_table([order(1, "2024-03-01")])
    batch1 = orders_table([order(2, "2024-03-01"), order(3, "2024-03-01")])
    assert append_exactly_once(target, batch0, "orders-stream", 0).committed
    assert append_exactly_once(target, batch1, "orders-stream", 1).committed
    replay = append_exactly_once(target, batch1, "orders-stream", 1)
    older = append_exactly_once(target, batch0, "orders-stream", 0)
    assert not replay.committed and not older.committed
    assert sorted(read_rows(target.open()).column("order_id").to_pylist()) == [1, 2, 3]
    assert DeltaTable(target.uri).transaction_version("orders-stream") == 1


def test_app_ids_are_independent(tmp_path):
    target = LakeTable(str(tmp_path / "stream"))
    rows = orders_table([order(1, "2024-03-01")])
    append_exactly_once(target, rows, "a", 0)
    result = append_exactly_once(target, rows, "b", 0)
    assert result.committed
    assert read_rows(target.open()).num_rows == 2


def test_append_rejects_bad_versions(tmp_path):
    target = LakeTable(str(tmp_path / "stream"))
    with pytest.raises(ValueError):
        append_exactly_once(target, orders_table([]), "a", -1)
    with pytest.raises(ValueError):
        append_exactly_once(target, orders_table([]), "", 0)
