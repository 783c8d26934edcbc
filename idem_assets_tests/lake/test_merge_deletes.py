"""Deletes ordered like updates.

The semantics, as a reference any order of loads must converge to: for each key, the event
(upsert or delete) with the highest version wins; at equal versions a delete wins (a source
that deletes and re-inserts at one version must say which came last). A winning delete means
no row. Loading days in any order, any number of times, gives the reference table, as long as
the tombstones (key, version of its newest delete) returned by each load are kept and passed to
the next (the checkpoint store keeps them in the Dagster layer).
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from idem_assets.lake import read_rows
from idem_assets.lake.merge import Tombstones, merge_changes, merge_with_deletes
from idem_assets.lake.tables import LakeTable

KEY, VERSION, OP = "customer_id", "updated_at", "op"
DAYS, KEYS = 30, 60


def change_days(seed: int) -> list[pa.Table]:
    """30 days of changes: upserts and about 10% deletes, versions across days."""
    rng = random.Random(seed)
    days = []
    for day in range(DAYS):
        rows = []
        for _ in range(rng.randint(5, 25)):
            key = rng.randrange(KEYS)
            version = day * 100 + rng.randrange(150)  # late and early rows overlap days
            rows.append(
                {
                    KEY: key,
                    VERSION: version,
                    "segment": rng.choice(["smb", "consumer", "enterprise"]),
                    OP: "D" if rng.random() < 0.1 else "U",
                }
            )
        days.append(pa.Table.from_pylist(rows))
    return days


def reference(days: list[pa.Table]) -> dict[int, dict]:
    """Key -> the stored row, by the rule in the module docstring."""
    newest: dict[int, tuple[tuple[int, int, str], dict]] = {}
    for table in days:
        for row in table.to_pylist():
            rank = (row[VERSION], 1 if row[OP] == "D" else 0, row["segment"])
            if row[KEY] not in newest or rank > newest[row[KEY]][0]:
                newest[row[KEY]] = (rank, row)
    return {
        key: {k: v for k, v in row.items() if k != OP}
        for key, (_, row) in newest.items()
        if row[OP] != "D"
    }


def test_the_reference_keeps_newest_events_and_drops_deleted_keys():
    days = change_days(1)
    stored = reference(days)
    deleted = {r[KEY] for t in days for r in t.to_pylist() if r[OP] == "D"}
    assert stored and deleted and len(stored) < KEYS
    # Order of the days does not matter to the reference itself.
    assert reference(list(reversed(days))) == stored


def _load_in_order(root, days: list[pa.Table], order: list[int]) -> dict[int, dict]:
    target = LakeTable(str(root))
    kept = None
    for index in order:
        _, kept = merge_changes(
            target,
            days[index],
            [KEY],
            version_column=VERSION,
            delete_column=(OP, "D"),
            tombstones=kept,
        )
    stored = read_rows(target.open()).to_pylist()
    assert len({row[KEY] for row in stored}) == len(stored)  # one row per key
    return {row[KEY]: row for row in stored}


@pytest.mark.parametrize("seed", range(50))
def test_random_orders_with_reruns_converge_to_the_reference(tmp_path, seed):
    days = change_days(seed)
    want = reference(days)
    rng = random.Random(seed)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)
    assert _load_in_order(tmp_path / "lake", days, order) == want


def test_an_unchanged_rerun_commits_nothing(tmp_path):
    days = change_days(3)
    target = LakeTable(str(tmp_path / "lake"))
    kept = None
    for day in days:
        _, kept = merge_changes(
            target, day, [KEY], version_column=VERSION, delete_column=(OP, "D"), tombstones=kept
        )
    version = target.open().version()
    for day in days:
        result, kept = merge_changes(
            target, day, [KEY], version_column=VERSION, delete_column=(OP, "D"), tombstones=kept
        )
        assert result.committed is False
    assert target.open().version() == version


class TombstoneStore:
    """What the checkpoint store will keep: key -> version of its newest delete."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.versions: dict[int, int] = {}

    def remember(self, day: pa.Table) -> None:
        """Store a batch's deletes before its MERGE (monotonic: the max version wins)."""
        with self.lock:
            for row in day.to_pylist():
                if row[OP] == "D":
                    self.versions[row[KEY]] = max(row[VERSION], self.versions.get(row[KEY], -1))

    def table(self) -> pa.Table:
        with self.lock:
            items = sorted(self.versions.items())
        return pa.table(
            {KEY: [k for k, _ in items], VERSION: [v for _, v in items]},
            schema=pa.schema([(KEY, pa.int64()), (VERSION, pa.int64())]),
        )


@pytest.mark.parametrize("seed", range(3))
def test_days_loaded_two_at_a_time_converge_to_the_reference(tmp_path, seed):
    days = change_days(100 + seed)
    target = LakeTable(str(tmp_path / "lake"))
    store = TombstoneStore()
    order = list(range(DAYS))
    random.Random(seed).shuffle(order)

    def load(index: int) -> None:
        store.remember(days[index])
        merge_changes(
            target,
            days[index],
            [KEY],
            version_column=VERSION,
            delete_column=(OP, "D"),
            tombstones=store.table,
        )

    merge_changes(  # the table exists before the pairs race for commits
        target, days[order[0]], [KEY], version_column=VERSION, delete_column=(OP, "D")
    )
    store.remember(days[order[0]])
    with ThreadPoolExecutor(max_workers=2) as pool:
        for pair in (order[i : i + 2] for i in range(1, DAYS, 2)):
            list(pool.map(load, pair))
    stored = read_rows(target.open()).to_pylist()
    assert {row[KEY]: row for row in stored} == reference(days)


def test_a_delete_committed_while_an_older_upsert_is_planned_still_wins(tmp_path):
    """Writer B loads an older upsert of a key; between B's reads, writer A stores the key's
    newer delete as a tombstone and commits it. B must not insert its older row on top."""
    target = LakeTable(str(tmp_path / "lake"))
    stones = Tombstones.beside(target, [KEY], VERSION)
    marker = (OP, "D")
    first = pa.table({KEY: [1, 2], VERSION: [1, 1], "segment": ["smb"] * 2, OP: ["U"] * 2})
    delete = pa.table({KEY: [1], VERSION: [5], "segment": ["smb"], OP: ["D"]})
    older = pa.table({KEY: [1], VERSION: [3], "segment": ["consumer"], OP: ["U"]})
    created = merge_with_deletes(target, first, [KEY], version_column=VERSION, delete_column=marker)
    assert (created.version, created.rows_inserted) == (0, 2)  # the first write creates it
    reads: list[pa.Table | None] = []

    def kept_deletes_then_a_delete_lands() -> pa.Table | None:
        known = stones.read()
        if not reads:  # B has read the kept deletes: A's whole write lands now
            merge_with_deletes(target, delete, [KEY], version_column=VERSION, delete_column=marker)
        reads.append(known)
        return known

    result, _ = merge_changes(
        target,
        older,
        [KEY],
        version_column=VERSION,
        delete_column=marker,
        tombstones=kept_deletes_then_a_delete_lands,
    )
    stored = {row[KEY]: row for row in read_rows(target.open()).to_pylist()}
    assert stored == reference([first, delete, older]) == {2: stored[2]}
    # B's first plan was made on the table before A's commit: its commit failed, and the
    # second attempt, on the newer table and A's tombstone, had nothing to write.
    assert (result.attempts, result.committed, len(reads)) == (2, False, 2)


@pytest.mark.parametrize("workers", [1, 2])
def test_tombstones_kept_beside_the_table_converge_in_any_order(tmp_path, workers):
    days = change_days(200 + workers)
    target = LakeTable(str(tmp_path / "lake"))
    rng = random.Random(workers)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)

    def load(index: int) -> None:
        merge_with_deletes(
            target, days[index], [KEY], version_column=VERSION, delete_column=(OP, "D")
        )

    load(order[0])
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for pair in (order[i : i + 2] for i in range(1, len(order), 2)):
            list(pool.map(load, pair))
    stored = read_rows(target.open()).to_pylist()
    assert {row[KEY]: row for row in stored} == reference(days)
    version = target.open().version()
    for day in days:  # every day again: nothing to commit
        assert (
            merge_with_deletes(
                target, day, [KEY], version_column=VERSION, delete_column=(OP, "D")
            ).committed
            is False
        )
    assert target.open().version() == version


@pytest.mark.parametrize("seed", range(5))
def test_pruned_to_the_batch_key_range_random_orders_still_converge(tmp_path, seed):
    """With the key as a pruning column, each load reads and merges only the files within
    its batch's [min, max] of keys, tombstones of its keys included, and still converges."""
    days = change_days(seed + 100)
    rng = random.Random(seed)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)
    target = LakeTable(str(tmp_path / "customers"))
    for index in order:
        merge_with_deletes(
            target,
            days[index],
            [KEY],
            version_column=VERSION,
            delete_column=(OP, "D"),
            prune_columns=[KEY],
        )
    stored = {row[KEY]: row for row in read_rows(target.open()).to_pylist()}
    assert stored == reference(days)
    version = target.open().version()
    merge_with_deletes(
        target,
        days[order[0]],
        [KEY],
        version_column=VERSION,
        delete_column=(OP, "D"),
        prune_columns=[KEY],
    )
    assert target.open().version() == version
