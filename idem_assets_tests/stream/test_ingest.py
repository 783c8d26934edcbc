"""Exactly-once ingestion in one process: batches, offsets, reruns, stale holders, accounting."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.io_manager import Window
from idem_assets.lake import Erased, erase_key, read_rows
from idem_assets.lib.landing_io import read_landing, write_quarantine
from idem_assets.resources import LakeResource
from idem_assets.sample import EVENTS, EVENTS_STREAM, PRODUCT_CATALOG
from idem_assets.stream import Busy, OffsetLog, StreamStateError, StreamStep
from idem_assets.stream.audit import audit_stream
from idem_assets_tests.checkpoint.clock import SteppedClock
from idem_assets_tests.stream.world import StreamWorld, expected_keys, expected_quarantine


def test_each_batch_is_committed_once_across_runs_and_new_files(world: StreamWorld) -> None:
    files = world.append(5)
    with world.store() as store:
        ingester = world.ingester(store, max_files_per_batch=2, max_batches_per_run=2)
        first = ingester.run()
        assert (first.stopped, [o.seq for o in first.outcomes]) == ("max_batches", [0, 1])
        second = ingester.run()
        assert (second.stopped, [o.seq for o in second.outcomes]) == ("drained", [2])
        files += world.append(3)
        third = ingester.run()
        assert [o.seq for o in third.outcomes] == [3, 4]
        version = world.table.open().version()
        idle = ingester.run()
        assert (idle.stopped, idle.outcomes) == ("drained", ())
        assert world.table.open().version() == version  # a rerun with nothing new: no commit
        assert {o.status for o in (*first.outcomes, *second.outcomes, *third.outcomes)} == {
            "committed"
        }
    keys = world.keys()
    assert len(keys) == len(set(keys)) == len(expected_keys(files))
    assert set(keys) == expected_keys(files)
    assert world.txn_version() == 4
    assert world.batch_commits() == {seq: 1 for seq in range(5)}
    assert sorted(world.quarantined()) == sorted(set(world.quarantined()))
    assert len(world.quarantined()) == expected_quarantine(files) == 2


def test_every_raw_row_is_accounted_for_per_batch(world: StreamWorld) -> None:
    files = world.append(8)
    with world.store() as store:
        report = world.ingester(store, max_files_per_batch=3).run()
    by_batch = {t.record_id: t.result for t in world.trackers()}
    assert len(by_batch) == 3 and all(t.status is Status.SUCCEEDED for t in world.trackers())
    assert sum(r["raw_rows"] for r in by_batch.values()) == sum(len(f.rows) for f in files)
    for outcome in report.outcomes:
        result = by_batch[f"{outcome.seq:012d}"]
        assert result["raw_rows"] == result["rows"] + result["quarantined"]
        assert str(world.batch_fingerprint(outcome.seq)) == result["fingerprint"]
        assert world.batch_fingerprint(outcome.seq).rows == result["rows"]
    assert sum(r["quarantined"] for r in by_batch.values()) == len(world.quarantined()) == 2
    # A stream's quarantine slice is keyed by its files: each row names a file of the batch
    # that counted it.
    files_of = {t.payload["seq"]: {f[0] for f in t.payload["files"]} for t in world.trackers()}
    for source_file, _ in world.quarantined():
        owners = [seq for seq, names in files_of.items() if source_file in names]
        assert len(owners) == 1 and by_batch[f"{owners[0]:012d}"]["quarantined"] >= 1


def test_offsets_are_fixed_in_file_order_with_their_sha256_before_any_write(
    world: StreamWorld,
) -> None:
    files = world.append(5)
    with world.store() as first, world.store() as second:
        planned = OffsetLog(first, EVENTS_STREAM).head_or_plan(world.landing, 3, 5)
        assert planned is not None and planned.seq == 0
        assert [f.relpath for f in planned.plan.files] == [
            f"events_stream/{f.path.name}" for f in files[:3]
        ]
        assert [f.sha256 for f in planned.plan.files] == [
            hashlib.sha256(f.path.read_bytes()).hexdigest() for f in files[:3]
        ]
        assert not world.table.exists()  # fixed before anything is written
        # Another planner sees the open batch instead of planning a second one.
        seen = OffsetLog(second, EVENTS_STREAM).head_or_plan(world.landing, 2, 5)
        assert seen is not None and (seen.seq, seen.plan) == (0, planned.plan)
        # The sequence number is a compare-and-set: a second plan for it is refused.
        assert not OffsetLog(second, EVENTS_STREAM).fix(planned.plan, 5)


def test_a_holder_whose_lease_ran_out_never_applies_its_batch_twice(world: StreamWorld) -> None:
    files = world.append(4)
    clock = SteppedClock()  # both ingesters' stores judge leases by it
    with (
        open_store(world.url, clock=clock) as slow_store,
        open_store(world.url, clock=clock) as fast_store,
    ):
        fast = world.ingester(fast_store, max_files_per_batch=2, lease_seconds=30)
        taken_over: list[object] = []

        def stall(step: StreamStep) -> None:
            # The slow holder stalls past its lease after reading batch 0; another ingester
            # takes the batch over and finishes the stream meanwhile.
            if step.step == "built" and not taken_over:
                clock.advance(0.6)
                taken_over.append(fast.run())

        slow = world.ingester(slow_store, stall, max_files_per_batch=2, lease_seconds=0.5)
        outcome = slow.ingest_next()
    assert isinstance(outcome, Busy) and "lost batch 0" in outcome.reason
    report = taken_over[0]
    assert [(o.seq, o.status, o.attempts) for o in report.outcomes] == [
        (0, "committed", 2),
        (1, "committed", 1),
    ]
    assert world.batch_commits() == {0: 1, 1: 1}
    assert set(world.keys()) == expected_keys(files) and len(world.keys()) == len(
        expected_keys(files)
    )


def test_a_table_that_lost_commits_is_not_written(sqlite_world: StreamWorld) -> None:
    world = sqlite_world
    world.append(4)
    with world.store() as store:
        world.ingester(store, max_files_per_batch=2, max_batches_per_run=1).run()
        for path in sorted(world.lake.joinpath("events_stream").rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        with pytest.raises(StreamStateError, match=r"lost commits .* batch 1 is not written"):
            world.ingester(store, max_files_per_batch=2).run()
    assert not world.table.exists()


def test_a_reset_store_cannot_claim_the_table_holds_other_files(
    tmp_path, sqlite_world: StreamWorld
) -> None:
    world = sqlite_world
    world.append(4)
    with world.store() as store:
        world.ingester(store, max_files_per_batch=2).run()
    fresh = StreamWorld(world.landing, world.lake, f"sqlite:///{tmp_path / 'other.db'}")
    with fresh.store() as store, pytest.raises(StreamStateError, match="different histories"):
        fresh.ingester(store, max_files_per_batch=3).run()
    # The same grouping is the same batch: a reset store recognises it as already written.
    again = StreamWorld(world.landing, world.lake, f"sqlite:///{tmp_path / 'again.db'}")
    with again.store() as store:
        report = again.ingester(store, max_files_per_batch=2).run()
    assert [(o.seq, o.status) for o in report.outcomes] == [(0, "reconciled"), (1, "reconciled")]
    assert world.batch_commits() == {0: 1, 1: 1}


def test_stream_quarantine_rows_survive_the_daily_quarantine_writers(
    sqlite_world: StreamWorld,
) -> None:
    world = sqlite_world
    world.append(4)
    with world.store() as store:
        world.ingester(store).run()
    stream_rows = world.quarantined()
    assert len(stream_rows) == 1
    lake = LakeResource(landing_dir=str(world.landing), lake_dir=str(world.lake))
    for contract, window in (
        (EVENTS, Window(dt.date(2024, 3, 1), dt.date(2024, 3, 8))),
        (PRODUCT_CATALOG, Window()),
    ):
        batch = read_landing(lake, contract, window)  # nothing landed: an empty slice
        write_quarantine(lake, contract, batch.quarantine, window, Erased())
    assert world.quarantined() == stream_rows
    table = world.quarantine.open()
    assert table.metadata().partition_columns == ["source", "partition_date"]


def test_an_erased_customer_is_left_out_of_later_batches_and_the_audit_still_holds(
    world: StreamWorld,
) -> None:
    world.append(3)
    with world.store() as store:
        world.ingester(store).run()
        held = read_rows(world.table.open()).column("customer_id").to_pylist()
        files = world.append(4)  # landed, not ingested yet
        later = [r["customer_id"] for f in files for r in f.rows]
        customer = max(set(held) & set(later), key=later.count)
        ledger = ErasureLedger(store)
        erasure = ledger.record("customer_id", str(customer))
        erased = erase_key(world.table, "customer_id", str(customer))
        ledger.note(erasure, {EVENTS_STREAM.name: erased})
        assert erased.rows_deleted == held.count(customer)
        assert audit_stream(store, EVENTS_STREAM, world.table).passed
        report = world.ingester(store).run()
        assert sum(o.erased for o in report.outcomes) >= 1
        assert customer not in read_rows(world.table.open()).column("customer_id").to_pylist()
        for outcome in report.outcomes:
            assert outcome.raw_rows == outcome.rows + outcome.quarantined + outcome.erased
        assert audit_stream(store, EVENTS_STREAM, world.table).passed
        # Rows of a committed batch lost behind the lake (no erasure) are still a problem.
        other = next(c for c in held if c != customer)
        erase_key(world.table, "customer_id", str(other))
        assert not audit_stream(store, EVENTS_STREAM, world.table).passed
