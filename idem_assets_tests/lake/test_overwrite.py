"""Partition overwrite: one commit per range, no-op reruns, and nothing outside the range."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets.lake import (
    LakeTable,
    PartitionMismatchError,
    fingerprint,
    overwrite_partitions,
    read_rows,
)
from idem_assets.lake.predicates import date_range
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.lake.rows import day, order, orders_table


def _write(target, rows, start, end):
    return overwrite_partitions(
        target, rows, "order_date", day(start), day(end), schema=ORDERS.schema
    )


def _days(table):
    return sorted({r["order_date"].isoformat() for r in read_rows(table.open()).to_pylist()})


def test_rerun_commits_nothing_and_keeps_the_fingerprint(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    rows = orders_table([order(i, "2024-03-01") for i in range(5)])
    first = _write(target, rows, "2024-03-01", "2024-03-02")
    second = _write(target, rows, "2024-03-01", "2024-03-02")
    assert first.committed and first.version == 0
    assert not second.committed and second.version == 0
    assert first.fingerprint == second.fingerprint
    assert DeltaTable(target.uri).version() == 0


def test_range_overwrite_replaces_every_day_in_one_commit(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    three_days = orders_table(
        [order(d * 10 + i, f"2024-03-0{d}") for d in (1, 2, 3) for i in range(3)]
    )
    _write(target, three_days, "2024-03-01", "2024-03-04")
    # A new version of the range where day 2 has no rows any more: the range
    # predicate must clear day 2 too, not only the window start (the peer's bug).
    replacement = orders_table([order(100, "2024-03-01"), order(300, "2024-03-03")])
    result = _write(target, replacement, "2024-03-01", "2024-03-04")
    assert result.committed and result.version == 1
    assert sorted(r["order_id"] for r in read_rows(target.open()).to_pylist()) == [100, 300]
    history = DeltaTable(target.uri).history(1)[0]
    assert history["operationParameters"]["predicate"].count("order_date") == 2


def test_days_outside_the_range_are_untouched(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(
        target,
        orders_table([order(1, "2024-03-01"), order(2, "2024-03-02")]),
        "2024-03-01",
        "2024-03-03",
    )
    _write(target, orders_table([order(5, "2024-03-02", "paid")]), "2024-03-02", "2024-03-03")
    rows = {r["order_id"]: r["status"] for r in read_rows(target.open()).to_pylist()}
    assert rows == {1: "placed", 5: "paid"}


def test_rows_outside_the_range_are_refused_and_the_table_is_untouched(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(target, orders_table([order(1, "2024-03-01")]), "2024-03-01", "2024-03-02")
    stray = orders_table([order(2, "2024-03-01"), order(3, "2024-03-09")])
    with pytest.raises(PartitionMismatchError, match="order_date not in \\[2024-03-01"):
        _write(target, stray, "2024-03-01", "2024-03-02")
    assert DeltaTable(target.uri).version() == 0
    assert [r["order_id"] for r in read_rows(target.open()).to_pylist()] == [1]


def test_empty_day_empties_only_that_partition(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(
        target,
        orders_table([order(1, "2024-03-01"), order(2, "2024-03-02")]),
        "2024-03-01",
        "2024-03-03",
    )
    result = _write(target, orders_table([]), "2024-03-02", "2024-03-03")
    assert result.committed and result.rows_written == 0
    assert _days(target) == ["2024-03-01"]


def test_slice_fingerprint_matches_written_data(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    rows = orders_table([order(i, "2024-03-02", amount=f"{i}.10") for i in range(40)])
    result = _write(target, rows, "2024-03-02", "2024-03-03")
    stored = read_rows(
        target.open(), ranges=[date_range("order_date", day("2024-03-02"), day("2024-03-03"))]
    )
    assert fingerprint(stored) == result.fingerprint == fingerprint(rows)
    assert isinstance(stored, pa.Table)


def test_files_signature_moves_only_when_the_slice_is_rewritten(tmp_path):
    from idem_assets.lake import slice_signature

    target = LakeTable(str(tmp_path / "orders"))
    _write(
        target,
        orders_table([order(1, "2024-03-01"), order(2, "2024-03-02")]),
        "2024-03-01",
        "2024-03-03",
    )
    day1 = [date_range("order_date", day("2024-03-01"), day("2024-03-02"))]
    day2 = [date_range("order_date", day("2024-03-02"), day("2024-03-03"))]
    before1, before2 = slice_signature(target.open(), day1), slice_signature(target.open(), day2)
    _write(target, orders_table([order(3, "2024-03-02")]), "2024-03-02", "2024-03-03")
    assert slice_signature(target.open(), day1) == before1
    assert slice_signature(target.open(), day2) != before2
    assert slice_signature(None) == "absent"


def _files_by_day(target: LakeTable) -> dict[str, set[str]]:
    """The data files of each order_date partition."""
    actions = pa.table(DeltaTable(target.uri).get_add_actions(flatten=True)).to_pylist()
    out: dict[str, set[str]] = {}
    for action in actions:
        out.setdefault(str(action["partition.order_date"]), set()).add(action["path"])
    return out


def _variant(day_number: int, variant: int) -> list[dict]:
    """Version ``variant`` of a day's orders (0: no rows at all)."""
    return [
        order(day_number * 100 + i, f"2024-03-{day_number:02d}", amount=f"{10 + variant}.00")
        for i in range(variant)
    ]


def test_a_range_rerun_rewrites_only_the_days_that_changed(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    days = {d: 3 for d in range(1, 5)}
    _write(
        target,
        orders_table([r for d, v in days.items() for r in _variant(d, v)]),
        "2024-03-01",
        "2024-03-05",
    )
    before = _files_by_day(target)
    days[3] = 2  # a producer re-delivers day 3 with one order fewer and other amounts
    changed = orders_table([r for d, v in days.items() for r in _variant(d, v)])
    result = _write(target, changed, "2024-03-01", "2024-03-05")
    assert (result.committed, result.version, result.rows_written) == (True, 1, 2)
    assert result.details == {"days_rewritten": 1, "days_kept": 3}
    after = _files_by_day(target)
    assert {day for day in after if after[day] != before[day]} == {"2024-03-03"}
    assert fingerprint(read_rows(target.open())) == fingerprint(changed)
    assert result.fingerprint == fingerprint(changed)


@pytest.mark.parametrize("seed", range(4))
def test_random_range_writes_converge_on_the_last_content_of_each_day(tmp_path, seed):
    """Ranges of days overwritten in a random order with random versions of each day
    (emptied days included): the table ends as the last write of every day left it, a
    write that changes nothing commits nothing, and each commit is one version."""
    import random

    rng = random.Random(seed)
    target = LakeTable(str(tmp_path / "orders"))
    expected: dict[int, int] = {}
    commits = 0
    for _ in range(12):
        first = rng.randint(1, 8)
        last = rng.randint(first, min(first + 4, 9))
        wanted = {d: rng.choice((0, 1, 2, 3)) for d in range(first, last + 1)}
        if rng.random() < 0.3:  # a rerun of what is stored
            wanted = {d: expected.get(d, 0) for d in wanted}
        rows = orders_table([r for d, v in wanted.items() for r in _variant(d, v)])
        created = target.open() is None
        result = _write(target, rows, f"2024-03-{first:02d}", f"2024-03-{last + 1:02d}")
        unchanged = all(expected.get(d, 0) == v for d, v in wanted.items())
        assert result.committed == (created or not unchanged)
        commits += result.committed
        expected.update(wanted)
        assert DeltaTable(target.uri).version() == commits - 1
    stored = read_rows(target.open())
    assert fingerprint(stored) == fingerprint(
        orders_table([r for d, v in sorted(expected.items()) for r in _variant(d, v)])
    )
