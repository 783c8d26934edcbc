"""MERGE upsert: newest wins, reruns rewrite nothing, untouched files are pruned."""

import itertools

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from idem_assets.lake import LakeTable, fingerprint, merge_upsert, plan_merge, read_rows
from idem_assets.sample.sources import CUSTOMERS
from idem_assets_tests.lake.rows import customer, customers_table


def _merge(target, rows):
    return merge_upsert(
        target,
        rows,
        ["customer_id"],
        version_column="updated_at",
        prune_columns=["customer_id"],
        schema=CUSTOMERS.schema,
    )


def _names(target):
    return {r["customer_id"]: r["name"] for r in read_rows(target.open()).to_pylist()}


def test_creates_table_then_rerun_updates_zero_rows_and_commits_nothing(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    rows = customers_table([customer(i, f"n{i}", "2024-03-01T00:00:00") for i in range(20)])
    first = _merge(target, rows)
    second = _merge(target, rows)
    assert first.committed and first.rows_inserted == 20
    assert not second.committed and second.rows_written == 0 and second.rows_updated == 0
    assert DeltaTable(target.uri).version() == 0
    assert first.fingerprint == second.fingerprint


def test_only_changed_rows_are_sent_and_new_ones_inserted(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    _merge(
        target, customers_table([customer(i, f"n{i}", "2024-03-01T00:00:00") for i in range(10)])
    )
    change = customers_table(
        [
            customer(3, "renamed", "2024-03-02T00:00:00"),  # newer: updates
            customer(4, "n4", "2024-03-01T00:00:00"),  # identical: not sent
            customer(42, "new", "2024-03-02T00:00:00"),  # new key: inserted
        ]
    )
    result = _merge(target, change)
    assert (result.rows_inserted, result.rows_updated) == (1, 1)
    names = _names(target)
    assert names[3] == "renamed" and names[42] == "new" and len(names) == 11


def test_older_change_arriving_late_never_overwrites_a_newer_one(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    _merge(target, customers_table([customer(1, "newest", "2024-03-05T00:00:00")]))
    result = _merge(target, customers_table([customer(1, "stale", "2024-03-02T00:00:00")]))
    assert not result.committed
    assert _names(target) == {1: "newest"}


def test_days_merged_in_any_order_give_the_same_table(tmp_path):
    days = [
        customers_table(
            [customer(1, "a1", "2024-03-01T00:00:00"), customer(2, "b1", "2024-03-01T00:00:00")]
        ),
        customers_table(
            [customer(1, "a2", "2024-03-02T00:00:00"), customer(3, "c2", "2024-03-02T00:00:00")]
        ),
        customers_table(
            [customer(2, "b3", "2024-03-03T00:00:00"), customer(1, "a0", "2024-02-28T00:00:00")]
        ),
    ]
    fingerprints = set()
    for n, order in enumerate(itertools.permutations(range(3))):
        target = LakeTable(str(tmp_path / f"perm{n}"))
        for i in order:
            _merge(target, days[i])
        fingerprints.add(fingerprint(read_rows(target.open())))
        assert _names(target) == {1: "a2", 2: "b3", 3: "c2"}
    assert len(fingerprints) == 1


def test_equal_versions_conflict_resolves_the_same_in_either_order(tmp_path):
    x = customers_table([customer(9, "x", "2024-03-01T00:00:00")])
    y = customers_table([customer(9, "y", "2024-03-01T00:00:00")])
    a, b = LakeTable(str(tmp_path / "a")), LakeTable(str(tmp_path / "b"))
    _merge(a, x), _merge(a, y)
    _merge(b, y), _merge(b, x)
    assert _names(a) == _names(b)


def test_duplicate_source_keys_are_deduplicated_before_merge(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    _merge(target, customers_table([customer(1, "a", "2024-03-01T00:00:00")]))
    dupes = customers_table(
        [customer(1, "old", "2024-03-02T00:00:00"), customer(1, "new", "2024-03-03T00:00:00")]
    )
    result = _merge(target, dupes)
    assert result.details["duplicates_dropped"] == 1
    assert _names(target) == {1: "new"}


def test_literal_key_range_prunes_untouched_files(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    # Ten files holding disjoint, clustered customer_id ranges.
    for block in range(10):
        rows = customers_table(
            [customer(block * 1000 + i, "x", "2024-03-01T00:00:00") for i in range(100)]
        )
        write_deltalake(target.uri, rows, mode="append")
    change = customers_table(
        [
            customer(5005, "changed", "2024-03-02T00:00:00"),
            customer(5050, "changed", "2024-03-02T00:00:00"),
        ]
    )
    result = _merge(target, change)
    assert result.rows_updated == 2
    assert result.details["files_scanned"] == 1
    assert result.details["files_skipped"] == 9
    history = DeltaTable(target.uri).history(1)[0]
    assert history["operationMetrics"]["num_target_files_removed"] == 1


def test_plan_reports_pending_changes_without_writing(tmp_path):
    target = LakeTable(str(tmp_path / "customers"))
    _merge(target, customers_table([customer(1, "a", "2024-03-01T00:00:00")]))
    batch = customers_table(
        [customer(1, "b", "2024-03-02T00:00:00"), customer(2, "c", "2024-03-02T00:00:00")]
    )
    plan = plan_merge(target.open(), batch, ["customer_id"], "updated_at", ["customer_id"])
    assert (plan.inserts, plan.updates) == (1, 1)
    assert DeltaTable(target.uri).version() == 0
    assert isinstance(plan.current, pa.Table) and plan.current.num_rows == 1


def test_without_a_version_column_the_batch_replaces_differing_rows(tmp_path):
    target = LakeTable(str(tmp_path / "plain"))
    first = customers_table(
        [customer(1, "zzz", "2024-03-01T00:00:00"), customer(2, "b", "2024-03-01T00:00:00")]
    )
    merge_upsert(target, first, ["customer_id"], schema=CUSTOMERS.schema)
    second = customers_table(
        [customer(1, "aaa", "2024-03-01T00:00:00"), customer(2, "b", "2024-03-01T00:00:00")]
    )
    result = merge_upsert(target, second, ["customer_id"], schema=CUSTOMERS.schema)
    assert (result.rows_inserted, result.rows_updated) == (0, 1)
    assert _names(target) == {1: "aaa", 2: "b"}
    again = merge_upsert(target, second, ["customer_id"], schema=CUSTOMERS.schema)
    assert not again.committed
