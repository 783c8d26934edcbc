"""Day and snapshot signatures, day listing and the newest-snapshot rule."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import time

import pytest

from idem_assets.landing import (
    HashCache,
    day_signature,
    list_days,
    read_days,
    read_snapshot,
    snapshot_signature,
)
from idem_assets.sample.sources import CUSTOMERS, ORDERS, PRODUCT_CATALOG
from idem_assets_tests.landing.builders import (
    DAY,
    column,
    day_file,
    orders_csv,
    put,
    read_day,
)

ROW = "1,7,1.00,paid,2024-03-01,2024-03-01T10:00:00Z"
CATALOG_HEADER = "product_id,name,category,price"


def test_signature_is_sha256_over_sorted_relpath_and_content_hash(tmp_path):
    a = put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    b = put(tmp_path, day_file("b.csv"), orders_csv())
    lines = "".join(
        f"{day_file(p.name)}\t{hashlib.sha256(p.read_bytes()).hexdigest()}\n" for p in (a, b)
    )
    expected = hashlib.sha256(lines.encode()).hexdigest()
    assert day_signature(tmp_path, ORDERS, DAY) == expected
    batch = read_day(tmp_path)
    assert batch.signature == expected
    assert batch.day_signatures() == {DAY: expected}
    assert [f.sha256 for f in batch.files] == [
        hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)
    ]


def test_no_files_means_no_signature(tmp_path):
    assert day_signature(tmp_path, ORDERS, DAY) is None
    put(tmp_path, day_file("_SUCCESS"), "")
    assert day_signature(tmp_path, ORDERS, DAY) is None
    assert snapshot_signature(tmp_path, PRODUCT_CATALOG) is None


def test_signature_follows_content_not_time_or_location(tmp_path):
    path = put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    before = day_signature(tmp_path, ORDERS, DAY)
    assert day_signature(tmp_path, ORDERS, DAY) == before
    os.utime(path, (0, 0))
    put(tmp_path, day_file(".staging.tmp"), "in progress")
    assert day_signature(tmp_path, ORDERS, DAY) == before
    copy = tmp_path / "elsewhere"
    put(copy, day_file("a.csv"), orders_csv(ROW))
    assert day_signature(copy, ORDERS, DAY) == before


@pytest.mark.parametrize("change", ["edit", "add", "rename", "truncate"])
def test_signature_changes_when_a_file_changes(tmp_path, change):
    path = put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    before = day_signature(tmp_path, ORDERS, DAY)
    if change == "edit":
        path.write_text(orders_csv(ROW.replace("1.00", "2.00")))
    elif change == "add":
        put(tmp_path, day_file("b.jsonl"), "")
    elif change == "rename":
        path.rename(path.with_name("z.csv"))
    else:
        path.write_bytes(b"")
    assert day_signature(tmp_path, ORDERS, DAY) != before


def test_signature_of_one_day_ignores_other_days(tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    before = day_signature(tmp_path, ORDERS, DAY)
    put(tmp_path, day_file("a.csv", day=DAY + dt.timedelta(days=1)), orders_csv())
    put(tmp_path, day_file("a.csv", source="customers"), "customer_id\n")
    assert day_signature(tmp_path, ORDERS, DAY) == before


def test_batch_day_signatures_match_per_day_signatures(tmp_path):
    days = [DAY + dt.timedelta(days=i) for i in range(3)]
    put(tmp_path, day_file("a.csv", day=days[0]), orders_csv(ROW))
    put(tmp_path, day_file("b.csv", day=days[2]), orders_csv())
    batch = read_days(tmp_path, ORDERS, days[0], days[-1] + dt.timedelta(days=1))
    assert batch.day_signatures() == {d: day_signature(tmp_path, ORDERS, d) for d in days}
    assert batch.day_signatures()[days[1]] is None


def test_list_days_lists_folders_with_readable_files(tmp_path):
    put(tmp_path, "orders/date=2024-03-03/a.csv", orders_csv())
    put(tmp_path, "orders/date=2024-03-01/a.jsonl", "")
    put(tmp_path, "orders/date=2024-03-02/_SUCCESS", "")
    put(tmp_path, "orders/date=2024-13-01/a.csv", orders_csv())
    put(tmp_path, "orders/day=2024-03-04/a.csv", orders_csv())
    put(tmp_path, "orders/date=2024-03-05", "a file, not a folder")
    assert list_days(tmp_path, ORDERS) == [dt.date(2024, 3, 1), dt.date(2024, 3, 3)]
    assert list_days(tmp_path, CUSTOMERS) == []
    with pytest.raises(ValueError, match="snapshot source"):
        list_days(tmp_path, PRODUCT_CATALOG)


def test_read_days_rejects_wrong_arguments(tmp_path):
    with pytest.raises(ValueError, match="is before start"):
        read_days(tmp_path, ORDERS, DAY, DAY - dt.timedelta(days=1))
    with pytest.raises(ValueError, match="use read_snapshot"):
        read_days(tmp_path, PRODUCT_CATALOG, DAY, DAY)
    with pytest.raises(ValueError, match="use read_days"):
        read_snapshot(tmp_path, ORDERS)
    empty = read_days(tmp_path, ORDERS, DAY, DAY)
    assert (empty.raw_rows, empty.start, empty.end) == (0, DAY, DAY)


def test_newest_snapshot_is_the_greatest_file_name(tmp_path):
    put(tmp_path, "product_catalog/catalog-2024-03-01.csv", f"{CATALOG_HEADER}\n1,A,toys,1.00\n")
    put(
        tmp_path,
        "product_catalog/catalog-2024-03-08.csv",
        f"{CATALOG_HEADER}\n1,A,toys,2.00\n2,B,books,3.50\n",
    )
    put(tmp_path, "product_catalog/catalog-2024-03-15.parquet", b"")
    put(tmp_path, "product_catalog/.catalog-2024-03-22.csv.tmp", "half")
    batch = read_snapshot(tmp_path, PRODUCT_CATALOG)
    assert [f.relpath for f in batch.files] == ["product_catalog/catalog-2024-03-08.csv"]
    assert column(batch, "product_id") == [1, 2]
    assert (batch.start, batch.end) == (None, None)
    assert sorted(batch.ignored_files) == [
        "product_catalog/.catalog-2024-03-22.csv.tmp",
        "product_catalog/catalog-2024-03-15.parquet",
    ]
    before = snapshot_signature(tmp_path, PRODUCT_CATALOG)
    assert before == batch.signature
    put(tmp_path, "product_catalog/catalog-2024-03-01.csv", f"{CATALOG_HEADER}\n9,Z,toys,1\n")
    # An older snapshot does not matter.
    assert snapshot_signature(tmp_path, PRODUCT_CATALOG) == before
    put(tmp_path, "product_catalog/catalog-2024-03-15.csv", f"{CATALOG_HEADER}\n3,C,toys,1\n")
    assert snapshot_signature(tmp_path, PRODUCT_CATALOG) != before
    assert column(read_snapshot(tmp_path, PRODUCT_CATALOG), "product_id") == [3]


def test_snapshot_quarantine_has_no_partition_date(tmp_path):
    put(
        tmp_path,
        "product_catalog/catalog-2024-03-01.csv",
        f"{CATALOG_HEADER}\n1,A,toys,-1.00\n2,B,toys,abc\n,C,toys,1.00\n",
    )
    batch = read_snapshot(tmp_path, PRODUCT_CATALOG)
    assert batch.quarantine.column("partition_date").to_pylist() == [None, None]
    assert batch.quarantine.column("reason").to_pylist() == [
        "price: value 'abc' is not a decimal number like 12.34",
        "product_id: natural key is null or blank",
    ]
    # A negative price is a business rule (a WARN check), so that row loads.
    assert column(batch, "product_id") == [1]


def _signature_with(root, cache):
    return day_signature(root, ORDERS, DAY, cache)


def test_hash_cache_reuses_hashes_of_unchanged_files(tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    put(tmp_path, day_file("b.csv"), orders_csv())
    first = HashCache(settle_seconds=0)
    expected = day_signature(tmp_path, ORDERS, DAY)
    assert _signature_with(tmp_path, first) == expected
    assert (first.hashed, first.reused) == (2, 0)
    second = HashCache(first.kept(), settle_seconds=0)
    assert _signature_with(tmp_path, second) == expected
    assert (second.hashed, second.reused) == (0, 2)
    assert second.kept() == first.kept()


def test_hash_cache_sees_a_rewrite_that_keeps_size_and_mtime(tmp_path):
    path = put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    cache = HashCache(settle_seconds=0)
    before = _signature_with(tmp_path, cache)
    stat = path.stat()
    # Same length, same mtime: only the content (and the ctime, which cannot be set) moves.
    path.write_text(orders_csv(ROW.replace("paid", "sent")))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # Within one tick of the file system's clock the ctime stays put (what settle_seconds
    # guards): set the times again until the ctime has moved.
    deadline = time.monotonic() + 30
    while path.stat().st_ctime_ns == stat.st_ctime_ns:
        assert time.monotonic() < deadline, "the file's ctime never moved"
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    again = HashCache(cache.kept(), settle_seconds=0)
    after = _signature_with(tmp_path, again)
    assert after != before and after == day_signature(tmp_path, ORDERS, DAY)
    assert (again.hashed, again.reused) == (1, 0)


def test_hash_cache_does_not_keep_hashes_of_files_still_being_written(tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    fresh = HashCache(settle_seconds=3600)
    _signature_with(tmp_path, fresh)
    assert fresh.hashed == 1 and fresh.kept() == {}


def test_hash_cache_ignores_entries_it_cannot_read(tmp_path):
    put(tmp_path, day_file("a.csv"), orders_csv(ROW))
    cache = HashCache({day_file("a.csv"): ["not", "a", "stamp"], "x": None}, settle_seconds=0)
    assert _signature_with(tmp_path, cache) == day_signature(tmp_path, ORDERS, DAY)
    assert cache.hashed == 1
