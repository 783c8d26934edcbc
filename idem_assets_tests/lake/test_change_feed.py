"""Change Data Feed: every strategy's feed names exactly the rows it changed, and a
consumer's ``ChangeFeed`` hands it each change once (replays made no-ops downstream)."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from idem_assets.checkpoint import Memo, open_store
from idem_assets.lake import (
    ChangeFeed,
    ChangeFeedDisabledError,
    Commit,
    LakeTable,
    Proof,
    WriteOptions,
    append_exactly_once,
    change_rows,
    date_range,
    fingerprint,
    merge_upsert,
    merge_with_deletes,
    overwrite_slice,
    overwrite_stream,
    read_rows,
    replace_table,
)
from idem_assets.lake.changes import OFFSETS_SCOPE
from idem_assets.lake.delta_log import removes
from idem_assets.lake.maintenance import compact, vacuum
from idem_assets.lake.staging import commit_staged, stage_batches
from idem_assets.lake.stored import data_files
from idem_assets.lake.tables import commit_properties, table_schema
from idem_assets_tests.checkpoint.clock import SteppedClock

CDF = {"delta.enableChangeDataFeed": "true"}
D1, D2, D3 = (dt.date(2024, 3, 1) + dt.timedelta(days=n) for n in range(3))
SCHEMA = pa.schema(
    [("id", pa.int64()), ("day", pa.date32()), ("v", pa.string()), ("updated", pa.int64())]
)
OP = "op"


def state(changed: bool = False, deletes: bool = True) -> pa.Table:
    """100 rows on each of D1 and D2; ``changed``: three keys of D1 differ (5 updated, 7
    deleted or, without ``deletes``, updated too, 500 new)."""
    rows = [
        {"id": i + (0 if day == D1 else 1000), "day": day, "v": "a", "updated": 1}
        for day in (D1, D2)
        for i in range(100)
    ]
    if changed:
        for row in rows:
            if row["id"] == 5 or (row["id"] == 7 and not deletes):
                row.update(v="b", updated=2)
        rows = [r for r in rows if not (r["id"] == 7 and deletes)]
        rows.append({"id": 500, "day": D1, "v": "n", "updated": 2})
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def feed_of(target: LakeTable, start: int) -> list[tuple[str, int]]:
    """(change type, id) of every change row from ``start`` on, pre-images included."""
    rows = change_rows(target, start, preimages=True)
    types, ids = rows.column("_change_type").to_pylist(), rows.column("id").to_pylist()
    return sorted(zip(types, ids, strict=True))


def version(target: LakeTable) -> int:
    table = target.open()
    assert table is not None
    return table.version()


def content(target: LakeTable) -> pa.Table:
    return read_rows(target.open()).select(SCHEMA.names)


KEYED = {("update_preimage", 5), ("update_postimage", 5), ("delete", 7), ("insert", 500)}
UNKEYED = {("delete", 5), ("insert", 5), ("delete", 7), ("insert", 500)}
UPSERTED = {
    ("update_preimage", 5),
    ("update_postimage", 5),
    ("update_preimage", 7),
    ("update_postimage", 7),
    ("insert", 500),
}


def _overwrite(key: tuple[str, ...]) -> Callable[[LakeTable, pa.Table], object]:
    def write(target: LakeTable, rows: pa.Table) -> object:
        commit = Commit(options=WriteOptions(table_config=CDF, change_key=key))
        whole = [date_range("day", D1, D3)]
        return overwrite_slice(target, rows, whole, partition_by=["day"], commit=commit)

    return write


def _replace(target: LakeTable, rows: pa.Table) -> object:
    commit = Commit(options=WriteOptions(table_config=CDF, change_key=("id",)))
    return replace_table(target, rows, commit=commit)


def _stream(target: LakeTable, rows: pa.Table) -> object:
    if not target.exists():
        _overwrite(())(target, rows)  # a streamed write does not create tables with a config
        return None
    return overwrite_stream(target, rows.to_reader(max_chunksize=40), "day", D1, D3)


def _staged_merge(target: LakeTable, rows: pa.Table) -> object:
    """What the Spark merge commits: staged files of the rewritten partition, and the
    removes of that partition's files, in one staged commit."""
    table = target.open()
    if table is None:
        return _overwrite(())(target, rows)
    day1 = rows.filter(pc.equal(rows.column("day"), pa.scalar(D1)))
    staged = stage_batches(target, [day1], table_schema(table), "day")
    gone = removes(data_files(table, "day", lambda v: v == D1), "day")
    return commit_staged(
        target,
        table,
        staged,
        commit_properties({}),
        schema=table_schema(table),
        removes=gone,
        change_key=("id",),
    )


def _upsert(target: LakeTable, rows: pa.Table) -> object:
    return merge_upsert(
        target,
        rows,
        ["id"],
        version_column="updated",
        partition_column="day",
        commit=Commit(options=WriteOptions(table_config=CDF)),
    )


def _with_deletes(target: LakeTable, rows: pa.Table) -> object:
    """The new state as upserts, with a delete (newer version) for each stored key gone."""
    table = target.open()
    gone = pa.table({"id": pa.array([], pa.int64())})
    if table is not None:
        stored = read_rows(table, columns=["id", "day", "updated"])
        gone = stored.filter(pc.invert(pc.is_in(stored.column("id"), rows.column("id"))))
    deletes = pa.table(
        {
            "id": gone.column("id"),
            "day": gone.column("day") if gone.num_rows else pa.array([], pa.date32()),
            "v": pa.nulls(gone.num_rows, pa.string()),
            "updated": pa.array([2] * gone.num_rows, pa.int64()),
        }
    )
    batch = pa.concat_tables([rows, deletes.cast(SCHEMA)])
    marks = ["U"] * rows.num_rows + ["D"] * deletes.num_rows
    return merge_with_deletes(
        target,
        batch.append_column(OP, pa.array(marks)),
        ["id"],
        version_column="updated",
        delete_column=(OP, "D"),
        commit=Commit(options=WriteOptions(table_config=CDF)),
    )


@dataclass(frozen=True)
class Strategy:
    write: Callable[[LakeTable, pa.Table], object]
    expected: set[tuple[str, int]]
    deletes: bool = True


STRATEGIES = {
    "overwrite_keyed": Strategy(_overwrite(("id",)), KEYED),
    "overwrite_all_columns": Strategy(_overwrite(()), UNKEYED),
    "replace_keyed": Strategy(_replace, KEYED),
    "overwrite_stream_staged": Strategy(_stream, UNKEYED),
    "staged_commit_with_removes": Strategy(_staged_merge, KEYED),
    "merge_upsert": Strategy(_upsert, UPSERTED, deletes=False),
    "merge_with_deletes": Strategy(_with_deletes, KEYED),
}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_rerun_feeds_exactly_the_rows_it_changed(tmp_path: Path, name: str):
    strategy = STRATEGIES[name]
    target = LakeTable(str(tmp_path / "t"))
    strategy.write(target, state())
    first = version(target)
    assert fingerprint(content(target)) == fingerprint(state())

    strategy.write(target, state())  # unchanged rerun: no version, nothing in the feed
    assert version(target) == first
    assert change_rows(target, first + 1).num_rows == 0

    new = state(changed=True, deletes=strategy.deletes)
    strategy.write(target, new)
    assert version(target) == first + 1, "one commit"
    assert feed_of(target, first + 1) == sorted(strategy.expected)
    assert fingerprint(content(target)) == fingerprint(new)

    strategy.write(target, new)
    assert version(target) == first + 1


def test_deletes_through_merge_with_deletes_feed_delete_rows(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    _with_deletes(target, state())
    first = version(target)
    kept = state().filter(pc.invert(pc.is_in(state().column("id"), pa.array([3, 1004, 1050]))))
    _with_deletes(target, kept)
    rows = change_rows(target, first + 1)
    assert sorted(rows.column("id").to_pylist()) == [3, 1004, 1050]
    assert set(rows.column("_change_type").to_pylist()) == {"delete"}
    assert rows.column("v").to_pylist() == ["a", "a", "a"]  # the deleted rows as they were


def test_a_repeated_row_is_counted_when_rows_have_no_key(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    row = {"id": 1, "day": D1, "v": "a", "updated": 1}
    write = _overwrite(())
    write(target, pa.Table.from_pylist([row, row, row], schema=SCHEMA))
    first = version(target)
    write(target, pa.Table.from_pylist([row, row], schema=SCHEMA))
    types = change_rows(target, first + 1).column("_change_type").to_pylist()
    assert sorted(types) == ["delete"] * 3 + ["insert"] * 2  # three held, two now
    assert content(target).num_rows == 2


def test_appends_feed_their_rows_and_a_replayed_txn_feeds_nothing(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    commit = Commit(options=WriteOptions(table_config=CDF))
    append_exactly_once(target, state(), "loader", 0, partition_column="day", commit=commit)
    batch = state(changed=True).filter(pc.is_in(pc.field("id"), pa.array([5, 500, 1001])))
    done = append_exactly_once(target, batch, "loader", 1, commit=commit)
    assert feed_of(target, done.version) == [("insert", 5), ("insert", 500), ("insert", 1001)]
    replay = append_exactly_once(target, batch, "loader", 1, commit=commit)
    assert not replay.committed and version(target) == done.version


def test_a_table_without_the_feed_is_refused_by_name(tmp_path: Path):
    target = LakeTable(str(tmp_path / "plain"))
    overwrite_slice(target, state(), [date_range("day", D1, D3)], partition_by=["day"])
    with pytest.raises(ChangeFeedDisabledError, match=r"plain.*delta\.enableChangeDataFeed=true"):
        change_rows(target, 0)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        with pytest.raises(ChangeFeedDisabledError, match="delta.enableChangeDataFeed"):
            ChangeFeed(store, "copy", target).pending()


def test_pending_on_a_missing_table_and_without_new_versions_is_empty(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        feed = ChangeFeed(store, "copy", target)
        nothing = feed.pending()
        assert nothing.empty and nothing.rows.num_rows == 0
        _overwrite(("id",))(target, state())
        start, end, rows = feed.pending()
        assert (start, end, rows.num_rows) == (0, 0, 200)
        feed.acknowledge(end)
        again = feed.pending()
        assert again.empty and again.rows.num_rows == 0 and feed.acknowledged() == 0


def test_commits_that_change_no_rows_feed_nothing(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    commit = Commit(options=WriteOptions(table_config=CDF))
    for number, part in enumerate(state().to_batches(max_chunksize=50)):
        append_exactly_once(
            target, part, f"part-{number}", 0, partition_column="day", commit=commit
        )
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        feed = ChangeFeed(store, "copy", target)
        assert feed.pending().rows.num_rows == 200
        feed.acknowledge(version(target))
        assert compact(target).committed  # two files per day become one
        vacuum(target)
        start, end, rows = feed.pending()
        assert end >= start and rows.num_rows == 0
        feed.acknowledge(end)
        assert feed.pending().empty
        assert fingerprint(content(target)) == fingerprint(state())


def test_preimages_are_kept_only_when_asked(tmp_path: Path):
    target = LakeTable(str(tmp_path / "t"))
    _upsert(target, state())
    _upsert(target, state(changed=True, deletes=False))
    last = version(target)
    kept = change_rows(target, last, preimages=True).column("_change_type").to_pylist()
    dropped = change_rows(target, last).column("_change_type").to_pylist()
    assert kept.count("update_preimage") == 2 and "update_preimage" not in dropped
    assert dropped.count("update_postimage") == 2


def test_a_consumer_that_stops_before_acknowledging_replays_to_the_same_downstream(
    tmp_path: Path,
):
    source, downstream = LakeTable(str(tmp_path / "src")), LakeTable(str(tmp_path / "down"))
    write = _overwrite(("id",))
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        feed = ChangeFeed(store, "copy", source, preimages=True)
        write(source, state())
        assert consume(feed, downstream).committed
        write(source, state(changed=True))
        start, end, rows = feed.pending()
        first = append_exactly_once(downstream, rows, "copy", end)
        assert first.committed  # ... and the consumer stops here, before acknowledging
        after_crash = fingerprint(read_rows(downstream.open()))
        write(source, state())  # a newer version comes before the consumer's rerun
        replayed = feed.pending()
        assert (replayed.start, replayed.end) == (start, end)
        assert fingerprint(replayed.rows) == fingerprint(rows)
        again = append_exactly_once(downstream, replayed.rows, "copy", replayed.end)
        assert not again.committed and again.proof is Proof.TXN
        feed.acknowledge(replayed.end)
        assert fingerprint(read_rows(downstream.open())) == after_crash
        newer = consume(feed, downstream)  # then the newer version, once
        assert newer is not None and newer.details["txn_version"] == end + 1
        assert fingerprint(rebuilt(downstream)) == fingerprint(content(source))
        assert feed.pending().empty


def consume(feed: ChangeFeed, downstream: LakeTable, crash: bool = False):
    """One run of a consumer: the pending changes appended exactly once to its change log,
    then acknowledged (unless it ``crash``es first)."""
    start, end, rows = feed.pending()
    if end < start:
        return None
    result = append_exactly_once(downstream, rows, feed.consumer, end)
    if not crash:
        feed.acknowledge(end)
    return result


def rebuilt(downstream: LakeTable) -> pa.Table:
    """The table a change log describes: each row held as often as it was inserted (or
    post-imaged) minus deleted (or pre-imaged)."""
    log = pl.from_arrow(read_rows(downstream.open()))
    assert isinstance(log, pl.DataFrame)
    data = [c for c in log.columns if not c.startswith("_")]
    sign = (
        pl.when(pl.col("_change_type").is_in(["insert", "update_postimage"])).then(1).otherwise(-1)
    )
    held = log.group_by(data).agg(sign.sum().alias("n"))
    assert held.filter(pl.col("n") < 0).height == 0, "a row deleted more often than inserted"
    held = held.filter(pl.col("n") > 0)
    return held.select(pl.col(data).repeat_by(pl.col("n"))).explode(data).to_arrow()


# --- Randomised: 30 days of upserts and deletes, loaded and reloaded in random orders -----
DAYS, KEYS, ORDERS = 30, 40, 50


def change_days(seed: int) -> list[pa.Table]:
    """Upserts and about 10% deletes per day, versions overlapping across days."""
    rng = random.Random(seed)
    days = []
    for day in range(DAYS):
        rows = []
        for _ in range(rng.randint(4, 12)):
            rows.append(
                {
                    "id": rng.randrange(KEYS),
                    "day": D1,
                    "v": rng.choice(["smb", "consumer", "enterprise"]),
                    "updated": day * 100 + rng.randrange(150),
                    OP: "D" if rng.random() < 0.1 else "U",
                }
            )
        days.append(pa.Table.from_pylist(rows, schema=SCHEMA.append(pa.field(OP, pa.string()))))
    return days


def reference(days: list[pa.Table]) -> pa.Table:
    """Per key the newest event (version, then a delete before an upsert, then content);
    keys whose newest event is a delete hold no row."""
    newest: dict[int, tuple[tuple[int, int, str], dict]] = {}
    for table in days:
        for row in table.to_pylist():
            rank = (row["updated"], row[OP] == "D", row["v"])
            if row["id"] not in newest or rank > newest[row["id"]][0]:
                newest[row["id"]] = (rank, row)
    kept = [row for _, row in newest.values() if row[OP] != "D"]
    return pa.Table.from_pylist(kept, schema=SCHEMA.append(pa.field(OP, pa.string()))).drop([OP])


@dataclass(frozen=True)
class Outcome:
    source: object
    rebuilt: tuple[object, object]  # the steady and the crashing consumer's tables
    logs: tuple[object, object]  # their change logs


def _one_order(root: Path, days: list[pa.Table], seed: int) -> Outcome:
    rng = random.Random(seed)
    order = list(range(DAYS))
    rng.shuffle(order)
    for again in rng.sample(range(DAYS), 6):  # reloads, anywhere after the first load
        order.insert(rng.randrange(order.index(again) + 1, len(order) + 1), again)
    source = LakeTable(str(root / "src"))
    steady, crashy = LakeTable(str(root / "steady")), LakeTable(str(root / "crashy"))
    with open_store(f"sqlite:///{root / 'state.db'}") as store:
        feeds = [
            (ChangeFeed(store, "steady", source, preimages=True), steady, 0.0),
            (ChangeFeed(store, "crashy", source, preimages=True), crashy, 0.4),
        ]
        for index in order:
            result = merge_with_deletes(
                source,
                days[index],
                ["id"],
                version_column="updated",
                delete_column=(OP, "D"),
                commit=Commit(options=WriteOptions(table_config=CDF)),
            )
            if result.committed and result.version > 0:
                # Exactly the rows the load changed: inserted, updated or deleted.
                assert change_rows(source, result.version).num_rows == result.rows_written
            for feed, downstream, crashes in feeds:
                if rng.random() < 0.3:
                    consume(feed, downstream, crash=rng.random() < crashes)
        for feed, downstream, _ in feeds:
            while not feed.pending().empty:
                consume(feed, downstream)
    return Outcome(
        fingerprint(read_rows(source.open())),
        (fingerprint(rebuilt(steady)), fingerprint(rebuilt(crashy))),
        (fingerprint(read_rows(steady.open())), fingerprint(read_rows(crashy.open()))),
    )


@pytest.mark.timeout(1800)  # ~150 s on a quiet machine; several times that under load
def test_consumers_rebuild_the_source_from_its_changes_in_any_order(tmp_path: Path):
    days = change_days(7)
    # Two processes, spawned (delta-rs's runtime does not survive a fork), an order at a time.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        roots = [tmp_path / f"order-{seed}" for seed in range(ORDERS)]
        outcomes = list(pool.map(_one_order, roots, [days] * ORDERS, range(ORDERS)))
    want = fingerprint(reference(days))
    for outcome in outcomes:
        assert outcome.source == want, "every order of loads gives the reference table"
        assert outcome.rebuilt == (want, want)
        # Replays after a crash appended nothing: both logs hold each change row once.
        assert outcome.logs[0] == outcome.logs[1]


@pytest.mark.parametrize("seed", range(3))
def test_two_writers_at_once_keep_the_feed_exact(tmp_path: Path, seed: int):
    """Days loaded two at a time on a table keeping a feed: the table is the reference, and
    its whole feed, replayed, rebuilds it (no change lost or doubled by a retried commit)."""
    days = change_days(seed + 11)
    rng = random.Random(seed)
    order = rng.sample(range(DAYS), DAYS) + rng.sample(range(DAYS), 6)
    source = LakeTable(str(tmp_path / "src"))

    def load(index: int) -> None:
        merge_with_deletes(
            source,
            days[index],
            ["id"],
            version_column="updated",
            delete_column=(OP, "D"),
            commit=Commit(options=WriteOptions(table_config=CDF)),
        )

    load(order[0])  # the table exists (with its feed) before writers race
    with ThreadPoolExecutor(2) as pool:
        for pair in (order[i : i + 2] for i in range(1, len(order), 2)):
            list(pool.map(load, pair))
    want = fingerprint(reference(days))
    assert fingerprint(read_rows(source.open())) == want
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        feed = ChangeFeed(store, "all", source, preimages=True)
        downstream = LakeTable(str(tmp_path / "log"))
        consume(feed, downstream)
    assert fingerprint(rebuilt(downstream)) == want


# --- One consumer name, several holders: leases on the store's clock --------------------


def test_a_live_lease_keeps_the_range_from_another_holder_until_it_ends(tmp_path: Path):
    source = LakeTable(str(tmp_path / "src"))
    clock = SteppedClock()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with open_store(url, clock=clock) as store:
        first = ChangeFeed(store, "copy", source, lease_seconds=30, holder="first")
        second = ChangeFeed(store, "copy", source, lease_seconds=30, holder="second")
        _overwrite(("id",))(source, state())
        taken = first.pending()
        assert (taken.start, taken.end, taken.holder) == (0, 0, "first")
        assert taken.held_until == clock.now + 30
        busy = second.pending()
        assert busy.empty and busy.busy and busy.rows.num_rows == 0
        assert (busy.holder, busy.held_until) == ("first", clock.now + 30)
        _overwrite(("id",))(source, state(changed=True))  # a newer version comes meanwhile
        clock.advance(10)
        renewed = first.pending()  # its own range: handed out again, the lease renewed
        assert (renewed.start, renewed.end, renewed.held_until) == (0, 0, clock.now + 30)
        clock.advance(31)  # ... the first holder died: its lease is over
        replay = second.pending()
        assert (replay.start, replay.end, replay.holder) == (0, 0, "second")
        assert fingerprint(replay.rows) == fingerprint(taken.rows)
        assert first.pending().busy  # now the second one's
        first.acknowledge(0)  # the late first holder's output holds version 0: it may say so
        second.acknowledge(0)  # ... and the second one's acknowledge changes nothing
        assert second.acknowledged() == 0
        newer = first.pending()
        assert (newer.start, newer.end) == (1, 1)
        first.acknowledge(1)
        second.acknowledge(0)  # never back
        assert second.acknowledged() == 1 and second.pending().empty
        assert not second.pending().busy


def test_a_holder_that_gives_its_range_back_hands_it_to_the_next_at_once(tmp_path: Path):
    source = LakeTable(str(tmp_path / "src"))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _overwrite(("id",))(source, state())
    with open_store(url, clock=SteppedClock()) as store:
        first = ChangeFeed(store, "copy", source, holder="first")
        assert first.pending().end == 0
        assert ChangeFeed(store, "copy", source).pending().busy
        assert first.release() and not first.release()
        again = ChangeFeed(store, "copy", source, holder="third").pending()
        assert (again.start, again.end, again.holder) == (0, 0, "third")


def test_a_waiting_holder_takes_the_range_when_it_comes_free(tmp_path: Path):
    source = LakeTable(str(tmp_path / "src"))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _overwrite(("id",))(source, state())
    with open_store(url) as store:
        first = ChangeFeed(store, "copy", source, holder="first")
        assert first.pending().end == 0

        def wait() -> tuple[int, int, str | None]:
            with open_store(url) as mine:
                got = ChangeFeed(mine, "copy", source, holder="waiter").pending(wait_seconds=300)
                return got.start, got.end, got.holder

        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(wait)
            first.release()
            assert waiting.result(timeout=300) == (0, 0, "waiter")
        assert ChangeFeed(store, "copy", source).pending(wait_seconds=0.05).busy


def test_compare_and_set_lets_one_of_racing_holders_take_a_range(tmp_path: Path):
    """Eight threads, each its own connection and ChangeFeed, ask at once: one is handed
    the range, the others are told who holds it."""
    source = LakeTable(str(tmp_path / "src"))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _overwrite(("id",))(source, state())

    def take(number: int) -> tuple[bool, str | None]:
        with open_store(url) as store:
            got = ChangeFeed(store, "copy", source, holder=f"h{number}").pending()
            return got.empty, got.holder

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(take, range(8)))
    winners = [holder for empty, holder in outcomes if not empty]
    assert len(winners) == 1
    assert {holder for empty, holder in outcomes if empty} == set(winners)


def test_an_offset_kept_before_leases_is_handed_out_again(tmp_path: Path):
    source = LakeTable(str(tmp_path / "src"))
    _overwrite(("id",))(source, state())
    _overwrite(("id",))(source, state(changed=True))
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        old = {"acknowledged": 0, "handed_out": 1}
        store.remember(OFFSETS_SCOPE, [Memo("copy", source.uri, old)])
        pending = ChangeFeed(store, "copy", source).pending()
        assert (pending.start, pending.end) == (1, 1) and not pending.busy


def test_lease_and_wait_must_be_seconds(tmp_path: Path):
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        with pytest.raises(ValueError, match="lease_seconds must be a finite number"):
            ChangeFeed(store, "copy", LakeTable(str(tmp_path / "t")), lease_seconds=0)
        with pytest.raises(ValueError, match="wait_seconds must be"):
            ChangeFeed(store, "copy", LakeTable(str(tmp_path / "t"))).pending(wait_seconds=-1)


def test_a_range_the_feed_cannot_read_is_not_left_leased(tmp_path: Path):
    """The feed turned on after the table was created: ``pending`` says so each time (its
    lease is given back), and a consumer acknowledging the version that turned it on
    starts after it."""
    target = LakeTable(str(tmp_path / "t"))
    append_exactly_once(target, state(), "loader", 0)
    DeltaTable(target.uri).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    turned_on = version(target)
    append_exactly_once(target, state(changed=True).slice(0, 3), "loader", 1)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        for holder in ("first", "second"):
            with pytest.raises(ChangeFeedDisabledError, match="kept no change feed"):
                ChangeFeed(store, "copy", target, holder=holder).pending()
        feed = ChangeFeed(store, "copy", target)
        feed.acknowledge(turned_on)
        start, end, rows = feed.pending()
        assert (start, end, rows.num_rows) == (turned_on + 1, turned_on + 1, 3)
