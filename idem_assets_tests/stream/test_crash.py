"""SIGKILL at every point of a batch, in a child process, then restart: each event exactly once."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.stream import RunReport, StreamIngester
from idem_assets_tests.checkpoint.clock import stepped_past_leases
from idem_assets_tests.stream.driver import read_events, spawn
from idem_assets_tests.stream.world import StreamWorld, expected_keys, expected_quarantine
from idem_assets_tests.waiting import WAIT_SECONDS, alive, wait_for_exit, wait_until

FILES, EVENTS, MAX_FILES = 8, 30, 2  # four batches; batch 1 holds a quarantined row
LAST_BATCH = FILES // MAX_FILES - 1
# (step, file index): where the child dies while it holds batch 1.
KILL_POINTS = {
    "before_read": ("claimed", None),
    "between_files": ("file_read", 0),
    "before_commit": ("built", None),
    "after_commit_before_checkpoint": ("committed", None),
    "after_quarantine_before_checkpoint": ("quarantined", None),
}
COMMITTED_BEFORE_DEATH = {"after_commit_before_checkpoint", "after_quarantine_before_checkpoint"}


def driver_spec(world: StreamWorld, events: Path, owner: str, **extra: Any) -> dict[str, Any]:
    """A driver spec over `world` with the suite's batch size."""
    return {
        "landing": str(world.landing),
        "lake": str(world.lake),
        "url": world.url,
        "owner": owner,
        "events": str(events),
        "max_files": MAX_FILES,
        "max_batches": 10,
        "lease_seconds": 1.0,
        **extra,
    }


def drain(ingester: StreamIngester, runs: int = 10) -> list[RunReport]:
    """Run until the stream is drained; no batch may be busy (the ingester's store clock is
    past every lease a dead holder left)."""
    reports: list[RunReport] = []
    for _ in range(runs):
        reports.append(ingester.run())
        if reports[-1].stopped == "drained":
            return reports
        assert reports[-1].stopped != "busy", reports[-1]
    raise AssertionError(f"stream did not drain in {runs} runs: {reports[-1]}")


def reference_fingerprints(world: StreamWorld, tmp_path: Path) -> dict[int, tuple[str, str]]:
    """(files signature, rows fingerprint) per batch of an uninterrupted run on the same files."""
    clean = StreamWorld(
        world.landing, tmp_path / "clean-lake", f"sqlite:///{tmp_path / 'clean.db'}"
    )
    with clean.store() as store:
        report = clean.ingester(store, max_files_per_batch=MAX_FILES).run()
    return {o.seq: (o.signature, o.fingerprint) for o in report.outcomes}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_then_restart_ingests_every_event_exactly_once(
    point: str, world: StreamWorld, tmp_path: Path
) -> None:
    files = world.append(FILES, EVENTS, defects=True)
    step, index = KILL_POINTS[point]
    kill = {"step": step, "seq": 1, **({} if index is None else {"index": index})}
    events = tmp_path / "events.jsonl"
    child = spawn(driver_spec(world, events, "doomed", kill=kill))
    died = wait_for_exit(
        child, f"the ingester to kill itself at {point}", seen=lambda: read_events(events)[-3:]
    )
    assert died == -signal.SIGKILL
    seen = read_events(events)
    assert (seen[-1]["step"], seen[-1]["seq"]) == (step, 1)

    # State at the moment of death: batch 1 held, in the table only if it died after commit.
    committed = point in COMMITTED_BEFORE_DEATH
    assert world.txn_version() == (1 if committed else 0)
    held = [t for t in world.trackers() if t.record_id == "000000000001"][0]
    assert (held.status, held.lease_owner) == (Status.IN_PROGRESS, "doomed")
    quarantine_before = len(world.quarantined())
    assert quarantine_before == (1 if point == "after_quarantine_before_checkpoint" else 0)

    # The restart's clock starts where the dead child's lease ran out: no waiting it out.
    with open_store(world.url, clock=stepped_past_leases(world.url)) as store:
        reports = drain(world.ingester(store, max_files_per_batch=MAX_FILES, lease_seconds=30))
    outcomes = {o.seq: o for r in reports for o in r.outcomes}
    assert sorted(outcomes) == [1, 2, 3]
    assert (outcomes[1].status, outcomes[1].attempts) == (
        "reconciled" if committed else "committed",
        2,
    )

    keys = world.keys()
    assert len(keys) == len(set(keys)) == len(expected_keys(files))
    assert set(keys) == expected_keys(files)
    assert world.txn_version() == LAST_BATCH
    assert world.batch_commits() == {seq: 1 for seq in range(LAST_BATCH + 1)}
    quarantined = world.quarantined()
    assert len(quarantined) == len(set(quarantined)) == expected_quarantine(files)
    trackers = world.trackers()
    assert [t.status for t in trackers] == [Status.SUCCEEDED] * (LAST_BATCH + 1)

    # Replay determinism: the plan the dead child fixed is the one rebuilt, with the same
    # rows as an uninterrupted run on the same files.
    reference = reference_fingerprints(world, tmp_path)
    planned = next(e for e in seen if e["step"] == "head" and e["seq"] == 1)
    assert planned["signature"] == trackers[1].payload["signature"] == reference[1][0]
    for seq, tracker in enumerate(trackers):
        assert (tracker.result["signature"], tracker.result["fingerprint"]) == reference[seq]
        assert str(world.batch_fingerprint(seq)) == reference[seq][1]
    built = [e for e in seen if e["step"] == "built" and e["seq"] == 1]
    if built:
        assert built[0]["fingerprint"] == reference[1][1]


@pytest.mark.slow
def test_two_ingester_processes_share_a_stream_without_duplicates(
    world: StreamWorld, tmp_path: Path
) -> None:
    stream_files = 16
    files = world.append(stream_files, EVENTS, defects=True)
    go = tmp_path / "go"
    logs = [tmp_path / f"events-{n}.jsonl" for n in range(2)]
    ready = [tmp_path / f"ready-{n}" for n in range(2)]
    children = [
        spawn(
            driver_spec(
                world,
                log,
                f"ingester-{n}",
                drain=True,
                ready_file=str(flag),
                go_file=str(go),
                max_batches=1,
                # Nobody dies here: a lease only has to outlast a batch on a loaded machine.
                lease_seconds=300,
                deadline_seconds=WAIT_SECONDS,
                turn_with=str(logs[1 - n]),  # each waits for the other's turn: both write
            )
        )
        for n, (log, flag) in enumerate(zip(logs, ready, strict=True))
    ]
    wait_until(  # both have opened the store
        lambda: (
            all(alive(child, "an ingester while starting") for child in children)
            and all(flag.exists() for flag in ready)
        ),
        "both ingesters to be ready",
        seen=lambda: [flag.name for flag in ready if flag.exists()],
        every=0.01,
    )
    go.touch()
    # Each drains within its own deadline (WAIT_SECONDS), and says so if it cannot.
    codes = [
        wait_for_exit(child, "an ingester to drain the stream", seconds=WAIT_SECONDS + 120)
        for child in children
    ]
    assert codes == [0, 0]

    seen = [event for log in logs for event in read_events(log)]
    batches = stream_files // MAX_FILES
    committed = [(e["owner"], e["seq"]) for e in seen if e["step"] == "committed"]
    assert sorted(seq for _, seq in committed) == list(range(batches))  # one writer per batch
    assert {owner for owner, _ in committed} == {"ingester-0", "ingester-1"}
    succeeded = sorted(e["seq"] for e in seen if e["step"] == "succeeded")
    assert succeeded == list(range(batches))
    keys = world.keys()
    assert len(keys) == len(set(keys)) == len(expected_keys(files))
    assert set(keys) == expected_keys(files)
    assert world.txn_version() == batches - 1
    assert world.batch_commits() == {seq: 1 for seq in range(batches)}
    quarantined = world.quarantined()
    assert len(quarantined) == len(set(quarantined)) == expected_quarantine(files)
    with world.store() as store:
        assert world.ingester(store).ingest_next() is None
