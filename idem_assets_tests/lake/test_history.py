"""History (SCD type 2) loads converge to one table whatever order the events arrive in.

The reference below applies the rule of ``idem_assets.lake.history`` to plain Python dicts:
per key and version one event counts (a delete beats an upsert, else the greater segment);
each counted upsert is a row valid from its version to the key's next counted event.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import polars as pl
import pyarrow as pa
import pytest

import idem_assets.lake.history as history_module
from idem_assets.lake import (
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    Fingerprint,
    LakeTable,
    fingerprint,
    history_deletes,
    history_problems,
    merge_history,
    read_rows,
)
from idem_assets.lake.history_deletes import DELETES_SUFFIX
from idem_assets_tests.waiting import WAIT_SECONDS, wait_until

KEY, VERSION, OP = "customer_id", "updated_at", "op"
DAYS, KEYS = 30, 200
ORDERS, ORDERS_SEED = 50, 11
SCHEMA = pa.schema(
    [(KEY, pa.int64()), (VERSION, pa.int64()), ("segment", pa.string()), (OP, pa.string())]
)
HISTORY = pa.schema(
    [
        (KEY, pa.int64()),
        (VERSION, pa.int64()),
        ("segment", pa.string()),
        (VALID_FROM, pa.int64()),
        (VALID_TO, pa.int64()),
        (IS_CURRENT, pa.bool_()),
    ]
)


def change_days(seed: int) -> list[pa.Table]:
    """30 days of changes: about 10% deletes, versions overlapping the next day's, and
    twins (same key and version, in any day) that tie with an upsert or a delete."""
    rng = random.Random(seed)
    days: list[list[dict]] = [[] for _ in range(DAYS)]
    for day in range(DAYS):
        for _ in range(rng.randint(20, 40)):
            row = {
                KEY: rng.randrange(KEYS),
                VERSION: day * 100 + rng.randrange(150),
                "segment": rng.choice(["smb", "consumer", "enterprise"]),
                OP: "D" if rng.random() < 0.1 else "U",
            }
            days[day].append(row)
            if rng.random() < 0.08:
                twin = {**row, "segment": rng.choice(["smb", "consumer", "enterprise"])}
                twin[OP] = "D" if rng.random() < 0.3 else "U"
                days[rng.randrange(DAYS)].append(twin)
    return [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in days]


def reference(days: list[pa.Table]) -> list[dict]:
    """The history rows, by the rule in the module docstring."""
    counted: dict[int, dict[int, dict]] = {}
    for table in days:
        for row in table.to_pylist():
            versions = counted.setdefault(row[KEY], {})
            rank = (row[OP] == "D", row["segment"])
            held = versions.get(row[VERSION])
            if held is None or rank > (held[OP] == "D", held["segment"]):
                versions[row[VERSION]] = row
    rows = []
    for key, versions in counted.items():
        order = sorted(versions)
        for at, version in enumerate(order):
            event = versions[version]
            if event[OP] == "D":
                continue
            until = order[at + 1] if at + 1 < len(order) else None
            rows.append(
                {
                    KEY: key,
                    VERSION: version,
                    "segment": event["segment"],
                    VALID_FROM: version,
                    VALID_TO: until,
                    IS_CURRENT: until is None,
                }
            )
    return sorted(rows, key=lambda r: (r[KEY], r[VALID_FROM]))


def load(target: LakeTable, day: pa.Table | pl.DataFrame):
    """One history load of ``day``."""
    return merge_history(target, day, [KEY], version_column=VERSION, delete_column=(OP, "D"))


def stored(target: LakeTable) -> list[dict]:
    """The table's rows in the reference's order, checked for history problems."""
    rows = read_rows(target.open())
    assert rows.schema.names == HISTORY.names
    deletes = history_deletes(target, [KEY], VERSION)
    assert history_problems(rows, [KEY], deletes=deletes).num_rows == 0
    return sorted(rows.to_pylist(), key=lambda r: (r[KEY], r[VALID_FROM]))


def table_fingerprint(target: LakeTable):
    """The content fingerprint of the whole table."""
    return fingerprint(read_rows(target.open()))


@pytest.mark.parametrize("seed", [ORDERS_SEED, 100, 101, 13, 14])
def test_the_reference_has_ties_deletes_resurrections_and_repeated_segments(seed):
    days = change_days(seed)
    rows = reference(days)
    assert reference(list(reversed(days))) == rows
    events = [r for t in days for r in t.to_pylist()]
    deletes = {(r[KEY], r[VERSION]) for r in events if r[OP] == "D"}
    upserts = {(r[KEY], r[VERSION]) for r in events if r[OP] == "U"}
    assert 0.05 < len([r for r in events if r[OP] == "D"]) / len(events) < 0.2
    assert deletes & upserts  # a delete and an upsert at one version: no row there
    assert not {(r[KEY], r[VALID_FROM]) for r in rows} & deletes
    pairs = [(r[KEY], r[VERSION]) for r in events if r[OP] == "U"]
    assert len(pairs) > len(set(pairs))  # two upserts at one version
    closed = {(r[KEY], r[VALID_TO]) for r in rows} & deletes
    resurrected = {k for k, v in closed if any(r[KEY] == k and r[VALID_FROM] > v for r in rows)}
    assert closed and resurrected
    by_key: dict[int, list[dict]] = {}
    for row in rows:
        by_key.setdefault(row[KEY], []).append(row)
    repeated = [
        k
        for k, h in by_key.items()
        if any(
            a["segment"] == b["segment"] and a[VALID_TO] == b[VALID_FROM]
            for a, b in zip(h, h[1:], strict=False)
        )
    ]
    assert repeated  # equal consecutive versions stay two rows
    assert len({r[KEY] for r in rows if r[IS_CURRENT]}) < len({r[KEY] for r in rows})


def test_each_version_is_a_row_and_a_late_version_lands_between(tmp_path):
    early = pa.Table.from_pylist(
        [
            {KEY: 1, VERSION: 10, "segment": "a", OP: "U"},
            {KEY: 1, VERSION: 20, "segment": "a", OP: "U"},
            {KEY: 1, VERSION: 30, "segment": "b", OP: "U"},
        ],
        schema=SCHEMA,
    )
    late = pa.Table.from_pylist([{KEY: 1, VERSION: 15, "segment": "c", OP: "U"}], schema=SCHEMA)
    stepwise, at_once = LakeTable(str(tmp_path / "stepwise")), LakeTable(str(tmp_path / "once"))
    load(stepwise, early)
    result = load(stepwise, late)
    load(at_once, pa.concat_tables([late, early]))
    periods = [(r["segment"], r[VALID_FROM], r[VALID_TO]) for r in stored(stepwise)]
    assert periods == [("a", 10, 15), ("c", 15, 20), ("a", 20, 30), ("b", 30, None)]
    assert stored(at_once) == stored(stepwise)
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (1, 1, 0)


def test_a_delete_before_the_upserts_it_closes_and_a_resurrection(tmp_path):
    target = LakeTable(str(tmp_path / "lake"))
    delete = pa.Table.from_pylist([{KEY: 1, VERSION: 50, "segment": "x", OP: "D"}], schema=SCHEMA)
    assert load(target, delete).rows_written == 0  # the table exists, empty
    assert stored(target) == []
    load(target, pl.DataFrame({KEY: [1], VERSION: [70], "segment": ["b"], OP: ["U"]}))
    load(target, pa.Table.from_pylist([{KEY: 1, VERSION: 10, "segment": "a", OP: "U"}], SCHEMA))
    periods = [(r["segment"], r[VALID_FROM], r[VALID_TO], r[IS_CURRENT]) for r in stored(target)]
    assert periods == [("a", 10, 50, False), ("b", 70, None, True)]


def test_ties_at_one_version_have_one_winner_and_a_delete_beats_an_upsert(tmp_path):
    target = LakeTable(str(tmp_path / "lake"))
    for segment in ["consumer", "smb", "enterprise"]:  # smb is the greatest
        load(
            target,
            pa.Table.from_pylist([{KEY: 1, VERSION: 5, "segment": segment, OP: "U"}], SCHEMA),
        )
    assert [r["segment"] for r in stored(target)] == ["smb"]
    removed = load(
        target, pa.Table.from_pylist([{KEY: 1, VERSION: 5, "segment": "a", OP: "D"}], SCHEMA)
    )
    assert removed.rows_deleted == 1 and stored(target) == []
    again = load(
        target, pa.Table.from_pylist([{KEY: 1, VERSION: 5, "segment": "smb", OP: "U"}], SCHEMA)
    )
    assert again.committed is False and stored(target) == []


def test_an_upsert_and_a_delete_at_one_version_in_one_commit_leave_no_row_for_it(tmp_path):
    # One batch: key 1 at version 10, then an upsert and a delete of it at version 20.
    events = [
        {KEY: 1, VERSION: 10, "segment": "smb", OP: "U"},
        {KEY: 1, VERSION: 20, "segment": "enterprise", OP: "U"},
        {KEY: 1, VERSION: 20, "segment": "a", OP: "D"},
    ]
    tables = set()
    for name, rows in (("forward", events), ("backward", events[::-1])):
        target = LakeTable(str(tmp_path / name))
        assert load(target, pa.Table.from_pylist(rows, SCHEMA)).version == 0  # one commit
        # The delete wins its version: no row for 20, version 10 closed at 20, none current.
        rows_now = stored(target)
        periods = [(r["segment"], r[VALID_FROM], r[VALID_TO], r[IS_CURRENT]) for r in rows_now]
        assert periods == [("smb", 10, 20, False)]
        assert history_deletes(target, [KEY], VERSION).to_pylist() == [{KEY: 1, VERSION: 20}]
        assert load(target, pa.Table.from_pylist(rows, SCHEMA)).committed is False
        tables.add(table_fingerprint(target))
    # The same events one batch each, the delete first: the same table.
    apart = LakeTable(str(tmp_path / "apart"))
    for row in events[::-1]:
        load(apart, pa.Table.from_pylist([row], SCHEMA))
    tables.add(table_fingerprint(apart))
    assert len(tables) == 1


def test_a_two_column_key(tmp_path):
    target = LakeTable(str(tmp_path / "lake"))
    rows = pl.DataFrame(
        {
            "region": ["eu", "eu", "us", "eu"],
            "id": [1, 1, 1, 1],
            "v": [1, 3, 2, 2],
            "deleted": [False, False, False, True],
        }
    )
    merge_history(
        target, rows, ["region", "id"], version_column="v", delete_column=("deleted", True)
    )
    got = sorted(
        (r["region"], r[VALID_FROM], r[VALID_TO]) for r in read_rows(target.open()).to_pylist()
    )
    assert got == [("eu", 1, 2), ("eu", 3, None), ("us", 2, None)]
    assert read_rows(target.open()).column_names == [
        "region",
        "id",
        "v",
        *(VALID_FROM, VALID_TO, IS_CURRENT),
    ]


def _random_order(rng: random.Random) -> list[int]:
    """Every day once, some two or three times, shuffled."""
    order = [day for day in range(DAYS) for _ in range(rng.choice([1, 1, 1, 1, 2, 3]))]
    rng.shuffle(order)
    return order


def _converge(root: str, order: list[int], prune: bool = False) -> tuple[list[dict], Fingerprint]:
    """Load the days of ``change_days(ORDERS_SEED)`` in ``order`` into a new table under
    ``root`` (``prune``: to each batch's key range); its rows (checked for problems) and
    fingerprint. Runs in a worker process."""
    days = change_days(ORDERS_SEED)
    target = LakeTable(root)
    for day in order:
        if prune:
            merge_history(
                target,
                days[day],
                [KEY],
                version_column=VERSION,
                delete_column=(OP, "D"),
                prune_columns=[KEY],
            )
        else:
            load(target, days[day])
    return stored(target), table_fingerprint(target)


@pytest.mark.timeout(1200)  # ~120 s on a quiet machine; several times that under load
def test_fifty_orders_with_reloads_converge_to_the_reference_and_one_fingerprint(tmp_path):
    want = reference(change_days(ORDERS_SEED))
    want_fingerprint = fingerprint(pa.Table.from_pylist(want, schema=HISTORY))
    forward = list(range(DAYS))
    randomly = [_random_order(random.Random(seed)) for seed in range(ORDERS - 2)]
    orders = [forward, forward[::-1], *randomly]
    assert max(order.count(day) for order in randomly for day in forward) == 3
    roots = [str(tmp_path / f"order{number}") for number in range(ORDERS)]
    # Each order has its own table; two processes keep both cores busy (threads would
    # mostly wait for each other's Python).
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        # Every other order prunes each load to its batch's key range: the same table.
        pruned = [number % 2 == 1 for number in range(ORDERS)]
        outcomes = list(pool.map(_converge, roots, orders, pruned))
    assert [number for number, (rows, _) in enumerate(outcomes) if rows != want] == []
    assert {fp for _, fp in outcomes} == {want_fingerprint}


@pytest.mark.parametrize("seed", range(2))
def test_two_writers_at_once_converge(tmp_path, seed):
    days = change_days(100 + seed)
    target = LakeTable(str(tmp_path / "lake"))
    order = _random_order(random.Random(seed))
    with ThreadPoolExecutor(max_workers=2) as pool:  # the first pair races to create it
        for pair in (order[i : i + 2] for i in range(0, len(order), 2)):
            list(pool.map(lambda day: load(target, days[day]), pair))
    assert stored(target) == reference(days)
    assert table_fingerprint(target) == fingerprint(
        pa.Table.from_pylist(reference(days), schema=HISTORY)
    )


def test_an_upsert_committed_after_a_concurrent_delete_is_planned_again(tmp_path, monkeypatch):
    """The writer of an old upsert reads the deletes before another stores the delete that
    closes it, and commits after: it must see the delete on its check and plan again."""
    target = LakeTable(str(tmp_path / "lake"))
    row = {KEY: 2, VERSION: 1, "segment": "smb", OP: "U"}
    load(target, pa.Table.from_pylist([row], SCHEMA))
    upsert = pa.Table.from_pylist([{**row, KEY: 1}], SCHEMA)
    delete = pa.Table.from_pylist([{**row, KEY: 1, VERSION: 5, OP: "D"}], SCHEMA)
    # Only the upsert has rows to commit, so only it reaches the point after planning: it
    # is held there (its first time) until the delete is stored.
    planned, go_on = threading.Event(), threading.Event()
    crash_point = history_module.crash_point

    def held_once_planned(name: str) -> None:
        if name == "lake.history_planned/lake" and not planned.is_set():
            planned.set()
            assert go_on.wait(WAIT_SECONDS), "the delete never let the upsert go on"
        crash_point(name)

    monkeypatch.setattr(history_module, "crash_point", held_once_planned)
    results = []
    late = threading.Thread(target=lambda: results.append(load(target, upsert)))
    late.start()
    wait_until(lambda: planned.is_set() or not late.is_alive(), "the upsert to finish its plan")
    assert planned.is_set(), "the upsert ended without reaching its commit"
    assert load(target, delete).committed is False  # key 1 is not stored yet: nothing to close
    go_on.set()
    wait_until(lambda: not late.is_alive(), "the upsert's commit", seen=results.copy)
    assert [(r[VALID_FROM], r[VALID_TO]) for r in stored(target) if r[KEY] == 1] == [(1, 5)]
    assert (results[0].rows_inserted, results[0].rows_updated) == (1, 1)  # in two rounds


def test_an_unchanged_rerun_commits_nothing(tmp_path):
    days = change_days(13)[:10]
    target = LakeTable(str(tmp_path / "lake"))
    for day in days:
        load(target, day)
    log = LakeTable(target.uri + DELETES_SUFFIX)
    versions = target.open().version(), log.open().version()
    for day in days:
        result = load(target, day)
        assert (result.committed, result.proof, result.attempts) == (False, "content", 1)
    assert (target.open().version(), log.open().version()) == versions
    assert stored(target) == reference(days)


@pytest.mark.parametrize("late", [2, 9])
def test_a_late_day_rewrites_only_its_keys(tmp_path, late):
    days = change_days(14)[:12]
    target = LakeTable(str(tmp_path / "lake"))
    for day, rows in enumerate(days):
        if day != late:
            load(target, rows)
    before = stored(target)
    result = load(target, days[late])
    after = stored(target)
    assert after == reference(days)
    touched = set(days[late].column(KEY).to_pylist())
    assert [r for r in before if r[KEY] not in touched] == [
        r for r in after if r[KEY] not in touched
    ]
    old = {(r[KEY], r[VALID_FROM]): r for r in before}
    new = {(r[KEY], r[VALID_FROM]): r for r in after}
    assert result.rows_inserted == len(new.keys() - old.keys()) > 0
    assert result.rows_deleted == len(old.keys() - new.keys())
    assert result.rows_updated == sum(old[k] != new[k] for k in old.keys() & new.keys()) > 0
    assert result.rows_written == result.rows_inserted + result.rows_updated + result.rows_deleted


def _history(*rows: tuple[int, int, int | None, bool]) -> pa.Table:
    return pa.Table.from_pylist(
        [{KEY: k, VALID_FROM: f, VALID_TO: t, IS_CURRENT: c} for k, f, t, c in rows]
    )


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([(1, 1, None, True), (1, 2, None, True)], "more than one current row"),
        ([(1, 1, 3, False), (1, 2, None, True)], "overlaps the next version"),
        ([(1, 1, 2, False), (1, 3, None, True)], "gap before the next version, no delete there"),
        ([(1, 1, 1, False), (1, 1, None, True)], "valid_to is not after valid_from"),
        ([(1, 1, 2, True), (1, 2, None, True)], "is_current disagrees with valid_to"),
        ([(1, 1, 2, False)], "closed with no later version or delete"),
    ],
)
def test_history_problems_name_each_broken_invariant(rows, problem):
    healthy = [(2, 1, 2, False), (2, 2, None, True)]
    found = history_problems(_history(*rows, *healthy), [KEY])
    assert (1, problem) in list(zip(*found.to_pydict().values(), strict=True))
    assert 2 not in found.column(KEY).to_pylist()


def test_a_gap_closed_by_a_stored_delete_is_no_problem():
    rows = _history((1, 1, 2, False), (1, 3, None, True), (2, 1, 4, False))
    deletes = pa.table({KEY: [1, 2], VERSION: [2, 4]})
    assert history_problems(rows, [KEY], deletes=deletes).num_rows == 0
    assert history_problems(rows, [KEY]).num_rows == 2
