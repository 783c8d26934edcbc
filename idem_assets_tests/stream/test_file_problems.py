"""Files that change after assignment or cannot be read: clear errors, ordering, set-aside."""

from __future__ import annotations

import time

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.landing import LandingFileError
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import (
    FileChangedError,
    OffsetLog,
    StreamBlocked,
    StreamError,
    set_aside_files,
)
from idem_assets_tests.stream.world import StreamWorld, expected_keys


def test_a_file_changed_after_assignment_fails_its_batch_naming_the_file(
    world: StreamWorld,
) -> None:
    files = world.append(4)
    victim = files[1].path
    original = victim.read_bytes()
    with world.store() as store:
        OffsetLog(store, EVENTS_STREAM).head_or_plan(world.landing, 2, 5)  # batch 0 fixed
        victim.write_bytes(original + b'{"event_id": "sneaked-in"}\n')
        ingester = world.ingester(store, max_files_per_batch=2, retry_delay_seconds=3600)
        with pytest.raises(
            FileChangedError,
            match=r"events_stream/events-000001\.csv: changed "
            r"after it was assigned to batch 0",
        ) as raised:
            ingester.run()
        assert raised.value.relpath == "events_stream/events-000001.csv"
        assert not world.table.exists()
        tracker = store.get(EVENTS_STREAM.scope, "000000000000")
        assert tracker is not None and tracker.status is Status.FAILED
        assert "events-000001.csv: changed after it was assigned" in (tracker.last_error or "")
        with pytest.raises(
            StreamBlocked,
            match=r"blocked at batch 0: attempt 1 of 5 failed "
            r"with: .*events-000001\.csv",
        ):
            ingester.run()
    # Restoring the original bytes is the fix: once the backoff is over, the same batch
    # goes through (a store whose clock reads an hour later stands for waiting an hour).
    victim.write_bytes(original)
    with open_store(world.url, clock=lambda: time.time() + 3601) as later:
        done = world.ingester(later, max_files_per_batch=2).run()
    assert [(o.seq, o.status, o.attempts) for o in done.outcomes] == [
        (0, "committed", 2),
        (1, "committed", 1),
    ]
    assert sorted(world.keys()) == sorted(expected_keys(files))


def test_a_committed_file_that_changes_later_is_never_read_again(sqlite_world: StreamWorld) -> None:
    world = sqlite_world
    files = world.append(2)
    with world.store() as store:
        world.ingester(store).run()
        files[0].path.write_bytes(files[0].path.read_bytes() + b'{"event_id": "late-edit"}\n')
        files += world.append(1)
        report = world.ingester(store).run()
    assert [(o.seq, o.files) for o in report.outcomes] == [(1, 1)]
    assert sorted(world.keys()) == sorted(expected_keys(files))


def test_an_unreadable_file_blocks_later_batches_until_set_aside(world: StreamWorld) -> None:
    files = world.append(6)
    broken = files[2].path  # events-000002.parquet, in batch 1 with events-000003
    broken.write_bytes(b"PAR1 this is not parquet")
    with world.store() as store:
        ingester = world.ingester(store, max_files_per_batch=2, retry_delay_seconds=0)
        with pytest.raises(LandingFileError, match=r"events_stream/events-000002\.parquet"):
            ingester.run()
        with pytest.raises(LandingFileError, match=r"events-000002\.parquet"):
            ingester.run()  # retried at once: still broken, and batch 2 still waits
        assert world.txn_version() == 0
        assert [t.payload["seq"] for t in store.list(EVENTS_STREAM.scope)] == [0, 1]
        with pytest.raises(StreamError, match="only the oldest unfinished batch"):
            set_aside_files(
                store,
                EVENTS_STREAM,
                world.table,
                0,
                ["events_stream/events-000000.jsonl"],
                "wrong batch",
            )
        replacement = set_aside_files(
            store,
            EVENTS_STREAM,
            world.table,
            1,
            ["events_stream/events-000002.parquet"],
            "corrupt at the producer; re-landed as a new file",
        )
        assert replacement == 2
        # Repeating the call finds the work done and changes nothing.
        assert (
            set_aside_files(
                store,
                EVENTS_STREAM,
                world.table,
                1,
                ["events_stream/events-000002.parquet"],
                "again",
            )
            == 2
        )
        report = ingester.run()
        abandoned = store.get(EVENTS_STREAM.scope, "000000000001")
    assert [(o.seq, o.files) for o in report.outcomes] == [(2, 1), (3, 2)]
    assert abandoned is not None and abandoned.status is Status.IGNORED
    assert "set aside events_stream/events-000002.parquet: corrupt" in (
        abandoned.ignored_reason or ""
    )
    survivors = [f for f in files if f.path != broken]
    assert sorted(world.keys()) == sorted(expected_keys(survivors))
    assert world.txn_version() == 3
    assert world.batch_commits() == {0: 1, 1: 1, 2: 1, 3: 1}  # batch 1: the empty fence
