"""Reference tests: the ways data that changes its past is usually handled really do damage
when days arrive out of order or are loaded again (docs/patterns.md)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from idem_assets.lake import LakeTable, read_rows
from idem_assets.lake.erasure import erase_key
from idem_assets.lake.history import merge_history
from idem_assets.lake.merge import merge_with_deletes
from idem_assets.lake.overwrite import overwrite_slice
from idem_assets.lake.predicates import date_range

KEY, VERSION, OP = "customer_id", "updated_at", "op"
# Day 2 deletes customer 1 (version 200); day 1, loaded late, still holds its older row.
DAY_1 = pa.table({KEY: [1, 2], VERSION: [100, 100], "segment": ["smb", "smb"], OP: ["U", "U"]})
DAY_2 = pa.table({KEY: [1, 3], VERSION: [200, 200], "segment": [None, "smb"], OP: ["D", "U"]})


def _delete_then_insert(uri: str, day: pa.Table) -> None:
    """The usual hand-made change load: DELETE the day's deleted keys, then upsert the rest."""
    rows = day.to_pylist()
    deleted = {r[KEY] for r in rows if r[OP] == "D"}
    upserts = [{k: v for k, v in r.items() if k != OP} for r in rows if r[OP] != "D"]
    try:
        table = DeltaTable(uri)
    except Exception:  # no table yet
        write_deltalake(uri, pa.Table.from_pylist(upserts))
        return
    kept = [r for r in read_rows(table).to_pylist() if r[KEY] not in deleted]
    by_key = {r[KEY]: r for r in kept}
    by_key.update({r[KEY]: r for r in upserts})
    write_deltalake(uri, pa.Table.from_pylist(list(by_key.values())), mode="overwrite")


def test_delete_then_insert_brings_a_deleted_key_back_when_an_older_day_arrives_late(tmp_path):
    wrong = str(tmp_path / "wrong")
    for day in (DAY_2, DAY_1):  # a backfill of day 1 after day 2
        _delete_then_insert(wrong, day)
    assert 1 in read_rows(DeltaTable(wrong)).column(KEY).to_pylist()  # resurrected

    # Deletes ordered by version like updates: the newer delete wins in any order.
    for order in ((DAY_1, DAY_2), (DAY_2, DAY_1), (DAY_2, DAY_1, DAY_2, DAY_1)):
        right = LakeTable(str(tmp_path / f"right{len(order)}{order[0] is DAY_1}"))
        for day in order:
            merge_with_deletes(right, day, [KEY], version_column=VERSION, delete_column=(OP, "D"))
        assert sorted(read_rows(right.open()).column(KEY).to_pylist()) == [2, 3]


def test_erasure_by_delete_alone_is_undone_by_the_next_rerun_of_an_old_day(tmp_path):
    start = dt.date(2024, 3, 1)
    day = pa.table({KEY: [1, 2], "day": [start, start]})
    target = LakeTable(str(tmp_path / "orders"))
    slice_ = [date_range("day", start, start + dt.timedelta(days=1))]
    overwrite_slice(target, day, slice_, partition_by=["day"])
    erase_key(target, KEY, "1")  # DELETE ... WHERE customer_id = 1, and nothing else
    assert read_rows(target.open()).column(KEY).to_pylist() == [2]
    # A rerun or backfill of that day reads its landing files again.
    overwrite_slice(target, day, slice_, partition_by=["day"])
    assert 1 in read_rows(target.open()).column(KEY).to_pylist()  # erased, and back
    # The right way (the ledger filters every later write) is proven end to end in
    # checks/test_erase_command.py and io_manager/test_merge_deletes_asset.py.


def _load_time_history(rows: list[dict], day: pa.Table, loaded_at: int) -> None:
    """The usual hand-made SCD2: each loaded row closes the key's current row and opens a
    new one, both dated by the load."""
    for change in day.to_pylist():
        for row in rows:
            if row[KEY] == change[KEY] and row["valid_to"] is None:
                row["valid_to"] = loaded_at
        if change[OP] != "D":
            rows.append(
                {
                    KEY: change[KEY],
                    "segment": change["segment"],
                    "valid_from": loaded_at,
                    "valid_to": None,
                }
            )


def test_load_time_history_depends_on_load_order_and_grows_on_every_rerun(tmp_path):
    forward: list[dict] = []
    for clock, day in enumerate((DAY_1, DAY_2)):
        _load_time_history(forward, day, clock)
    backward: list[dict] = []
    for clock, day in enumerate((DAY_2, DAY_1)):  # a backfill of day 1 after day 2
        _load_time_history(backward, day, clock)
    current = {r[KEY] for r in backward if r["valid_to"] is None}
    assert 1 in current  # the deleted customer is current again
    assert forward != backward
    rerun = [dict(r) for r in forward]
    _load_time_history(rerun, DAY_2, 2)
    assert len(rerun) > len(forward)  # a rerun adds versions that never happened

    # Periods from the version column: one table in both orders; a rerun commits nothing.
    tables = []
    for name, order in (("forward", (DAY_1, DAY_2)), ("backward", (DAY_2, DAY_1))):
        target = LakeTable(str(tmp_path / name))
        for day in order:
            merge_history(target, day, [KEY], version_column=VERSION, delete_column=(OP, "D"))
        tables.append(sorted(map(str, read_rows(target.open()).to_pylist())))
        again = merge_history(target, DAY_2, [KEY], version_column=VERSION, delete_column=(OP, "D"))
        assert not again.committed
    assert tables[0] == tables[1]
    assert not any("'customer_id': 1" in row and "'is_current': True" in row for row in tables[0])
