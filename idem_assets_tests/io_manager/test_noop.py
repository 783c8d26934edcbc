"""The no-op rule: a settled write vouches for a slice only while its files are unchanged."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from idem_assets.io_manager.noop import same_content, same_inputs, unchanged_since
from idem_assets.io_manager.tracking import SettledWrite
from idem_assets.lake import LakeTable, date_range, fingerprint, overwrite_slice, slice_signature

DAY1 = [date_range("day", dt.date(2024, 3, 1), dt.date(2024, 3, 2))]
DAY2 = [date_range("day", dt.date(2024, 3, 2), dt.date(2024, 3, 3))]


def _rows(day: dt.date, amount: int) -> pa.Table:
    return pa.table({"day": pa.array([day], pa.date32()), "amount": [amount]})


def test_a_settled_write_vouches_for_its_slice_until_a_commit_touches_it(tmp_path):
    target = LakeTable(str(tmp_path / "t"))
    first = _rows(dt.date(2024, 3, 1), 1)
    overwrite_slice(target, first, DAY1, partition_by=["day"])
    table = target.open()
    settled = SettledWrite(
        "r1",
        str(fingerprint(first)),
        slice_signature(table, DAY1),
        table.version(),
        1,
        "inputs-1",
        tuple(DAY1),
    )
    assert unchanged_since(settled, table)
    assert same_content(settled, table, fingerprint(first), DAY1)
    assert not same_content(settled, table, fingerprint(_rows(dt.date(2024, 3, 1), 2)), DAY1)
    assert same_inputs(settled, "inputs-1", lambda: table)

    overwrite_slice(target, _rows(dt.date(2024, 3, 2), 5), DAY2, partition_by=["day"])
    assert unchanged_since(settled, target.open())  # another day's commit leaves it alone
    overwrite_slice(target, _rows(dt.date(2024, 3, 1), 2), DAY1, partition_by=["day"])
    moved = target.open()
    assert not unchanged_since(settled, moved)
    assert not same_content(settled, moved, fingerprint(first), DAY1)
    assert not same_inputs(settled, "inputs-1", lambda: moved)


def test_other_inputs_are_decided_without_opening_the_table():
    settled = SettledWrite("r1", "v2:x", "1:abc", 0, 1, "inputs-1")
    opened: list[bool] = []

    def open_table():
        opened.append(True)
        return None

    assert not same_inputs(settled, "inputs-2", open_table)
    assert not same_inputs(None, "inputs-1", open_table)
    assert opened == []
