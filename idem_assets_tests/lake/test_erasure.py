"""Erasing a key from a Delta table: one commit, a no-op again, and the files that still
hold it found until a vacuum deletes them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from idem_assets.checkpoint import open_store
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.io_manager.erasure import scan_storage
from idem_assets.lake import LakeTable, read_rows
from idem_assets.lake.erasure import (
    CURRENT,
    REMOVED,
    Erased,
    erase_key,
    files_holding,
    key_digest,
    vacuum_erased,
)


def _customers(root) -> LakeTable:
    target = LakeTable(str(root / "customers"))
    for day in range(3):  # three files, each holding customer 7
        rows = [
            {"customer_id": c, "day": day, "name": f"n{c}"} for c in range(day * 5, day * 5 + 8)
        ]
        write_deltalake(target.uri, pa.Table.from_pylist(rows), mode="append")
    return target


def _files_with(root, column: str, value: object) -> list[str]:
    """Every Parquet file under ``root`` (data files of any version) holding the value."""
    found = []
    for path in sorted(root.rglob("*.parquet")):
        table = pq.read_table(path)
        if column in table.column_names and value in table.column(column).to_pylist():
            found.append(str(path))
    return found


def test_erasing_a_key_deletes_its_rows_in_one_commit_and_again_commits_nothing(tmp_path):
    target = _customers(tmp_path)
    before = DeltaTable(target.uri).version()
    done = erase_key(target, "customer_id", "7")  # the command line's text, an int64 column
    table = DeltaTable(target.uri)
    assert done.version == table.version() == before + 1
    assert done.rows_deleted == 2  # days 0 and 1 hold 7 (0-7 and 5-12)
    assert 7 not in read_rows(table).column("customer_id").to_pylist()
    assert read_rows(table).num_rows == 24 - 2
    # The commit names the key by digest, never by value.
    info = table.history(1)[0]
    assert info["idem.erased"] == key_digest("customer_id", "7")
    again = erase_key(target, "customer_id", "7")
    assert again.version is None and again.rows_deleted == 0
    assert DeltaTable(target.uri).version() == before + 1


def _held(scan) -> list[str]:
    return sorted(f.path for f in scan.held)


def _relative(root, paths: list[str]) -> list[str]:
    return sorted(str(p)[len(str(root)) + 1 :] for p in paths)


def test_the_removed_files_hold_the_key_until_a_vacuum_deletes_them(tmp_path):
    target = _customers(tmp_path)
    seven = Erased({"customer_id": frozenset({"7"})})
    before = files_holding(target, seven)
    assert [f.kind for f in before.held] == [CURRENT, CURRENT]
    done = erase_key(target, "customer_id", "7")
    assert len(done.files_removed) == 2
    scan = files_holding(target, seven)
    assert _held(scan) == sorted(done.files_removed) == _held(before)
    assert {f.kind for f in scan.held} == {REMOVED}
    assert scan.held[0].keys == (key_digest("customer_id", "7"),)
    assert _held(scan) == _relative(
        tmp_path / "customers", _files_with(tmp_path / "customers", "customer_id", 7)
    )
    # The third day's file (customers 10-17) is ruled out by its statistics; the erase's
    # rewrite (0-6 and 8-12) is read, its bounds cannot rule 7 out.
    assert (scan.files, scan.by_statistics, scan.read) == (4, 1, 3)
    # The retention passed: a vacuum deletes what no version younger than it needs.
    DeltaTable(target.uri).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert files_holding(target, seven).held == ()
    assert _files_with(tmp_path / "customers", "customer_id", 7) == []


def test_a_table_without_the_column_or_no_table_is_left_alone(tmp_path):
    assert erase_key(LakeTable(str(tmp_path / "none")), "customer_id", "7").version is None
    other = LakeTable(str(tmp_path / "other"))
    write_deltalake(other.uri, pa.table({"sku": [7]}))
    assert erase_key(other, "customer_id", "7").version is None
    assert DeltaTable(other.uri).version() == 0


def test_erased_keys_are_left_out_of_tables_and_streams_whatever_the_type():
    erased = Erased({"customer_id": frozenset({"7", "abc"})})
    ints = pa.table({"customer_id": [1, 7, None, 7], "x": [1, 2, 3, 4]})
    kept, removed = erased.without(ints)
    assert kept.column("x").to_pylist() == [1, 3] and removed == 2
    text = pa.table({"customer_id": ["abc", "abd"]})
    assert erased.without(text)[0].column("customer_id").to_pylist() == ["abd"]
    # A table without the column passes untouched.
    assert erased.without(pa.table({"sku": [7]}))[1] == 0
    batches = list(erased.without_batches(ints.to_batches(max_chunksize=2)))
    assert [b.num_rows for b in batches] == [1, 1]


def test_the_ledger_keeps_each_key_once_and_records_when_it_was_fully_gone(tmp_path):
    target = _customers(tmp_path)
    declared = {"customers": ("customer_id",)}
    located = {"customers": target}.__getitem__
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        ledger = ErasureLedger(store)
        first = ledger.record("customer_id", "7")
        assert ledger.record("customer_id", "7").erased_at == first.erased_at
        ledger.note(first, {"customers": erase_key(target, "customer_id", "7")})
        assert ledger.erased(["customer_id"]).values == {"customer_id": frozenset({"7"})}
        assert ledger.erased(["email"]).values == {}
        scan = scan_storage(ledger, located, declared)
        (entry,) = scan.entries
        assert len(scan.holding(entry)["customers"]) == 2 and entry.gone_at is None
        assert [kind for _, kind in ledger.entries()[0].held["customers"]] == [REMOVED] * 2
        # Overriding the retention deletes them now; the next scan records the time.
        vacuum_erased(target, scan.tables["customers"], store.now())
        assert _files_with(tmp_path / "customers", "customer_id", 7) == []
        (gone,) = scan_storage(ledger, located, declared).entries
        assert gone.held == {} and gone.gone_at is not None
        assert ledger.entries()[0].gone_at == gone.gone_at
        # A later scan keeps the first time it was found gone.
        assert scan_storage(ledger, located, declared).entries[0].gone_at == gone.gone_at
