"""Several OS processes consume one change feed under the SAME consumer name while commits
land and the processes are SIGKILLed (from outside, and inside ``consume_changes`` between
the append and the acknowledge) and restarted: the output holds each change row once, and
no range is held by two live processes at once.

Each worker process logs what it was handed (``handed``), when its append returned
(``written``, logged before the acknowledge) and that it acknowledged (``acknowledged``) to a
file of its own, with this machine's monotonic clock (one clock for every process) and its
lease's end on the store's clock.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from idem_assets.checkpoint import open_store
from idem_assets.faults import CRASH_ENV
from idem_assets.lake import (
    ChangeFeed,
    Commit,
    LakeTable,
    WriteOptions,
    change_rows,
    merge_with_deletes,
    read_rows,
)
from idem_assets.lake.changes import OFFSETS_SCOPE
from idem_assets.lib import append_changes, changes_metadata, consume_changes
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.checkpoint.clock import stepped_from
from idem_assets_tests.waiting import wait_until

CONSUMER, SOURCE, OUTPUT = "copier", "src", "out"
CRASH_POINT = f"changes.before_acknowledge/{CONSUMER}"
CDF = {"delta.enableChangeDataFeed": "true"}
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("updated", pa.int64())])
OP = "op"
# Long against a block (one range read and appended: well under a second on a quiet machine,
# seconds on a loaded one), so that no live holder outlives its lease; every kill of a holder
# costs the others this wait.
LEASE_SECONDS, WAIT_SECONDS, IDLE_SECONDS = 8.0, 1.0, 0.1
COMMITS, KEYS, EXTERNAL_KILLS, CRASH_CHANCE, PACED = 12, 20, 2, 0.25, 0.6
SLOTS = 2
DEADLINE_SECONDS = 300.0


# --- The worker process --------------------------------------------------------------


def consume_until_final(spec: dict[str, Any]) -> None:
    """Loop ``consume_changes`` + ``append_changes`` until the offset reaches the version in
    ``spec["final"]`` (a file the test writes once every commit has landed)."""
    if spec["crash_at"] is not None:
        os.environ[CRASH_ENV] = f"{CRASH_POINT}:{spec['crash_at']}"
    lake = LakeResource(lake_dir=spec["lake"])
    checkpoint = CheckpointResource(url=spec["url"])
    final = Path(spec["final"])
    # Warm up (first reads, lazy imports), so that the first block is as quick as the rest.
    change_rows(lake.table(SOURCE), 0, 0)
    importlib.import_module("deltalake.writer")
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(event: str, **entry: Any) -> None:
        line = json.dumps({"event": event, "at": time.monotonic(), **entry}) + "\n"
        os.write(log, line.encode())  # one write per line: a reader sees whole lines

    while True:
        with consume_changes(
            lake,
            checkpoint,
            SOURCE,
            CONSUMER,
            lease_seconds=LEASE_SECONDS,
            wait_seconds=WAIT_SECONDS,
        ) as changes:
            if not changes.empty:
                where = {"start": changes.start, "end": changes.end}
                record("handed", held_until=changes.held_until, **where)
                written = append_changes(lake.table(OUTPUT), changes, CONSUMER)
                record("written", committed=bool(written and written.committed), **where)
        if not changes.empty:
            record("acknowledged", start=changes.start, end=changes.end)
        if changes.busy:
            continue
        if changes.empty and final.exists() and changes.end >= int(final.read_text()):
            return
        if changes.empty:
            time.sleep(IDLE_SECONDS)


# --- The test's side: commits, processes, kills --------------------------------------


def source_commits(rng: random.Random) -> list[pa.Table]:
    """Upserts (new keys are inserts, known ones updates) and about 20% deletes; each commit
    has a newer version than every earlier one, so each one changes rows."""
    commits = []
    for number in range(COMMITS):
        rows = [
            {
                "id": rng.randrange(KEYS),
                "v": rng.choice(["a", "b", "c"]),
                "updated": number * 100 + index,
                OP: "D" if index and rng.random() < 0.2 else "U",
            }
            for index in range(rng.randint(3, 8))
        ]
        commits.append(pa.Table.from_pylist(rows, schema=SCHEMA.append(pa.field(OP, pa.string()))))
    return commits


def land(source: LakeTable, rows: pa.Table) -> int:
    result = merge_with_deletes(
        source,
        rows,
        ["id"],
        version_column="updated",
        delete_column=(OP, "D"),
        commit=Commit(options=WriteOptions(table_config=CDF)),
    )
    assert result.committed
    return int(result.version)


def log_lines(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a worker's log (a line being written is left for the next read)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:-1]]


@dataclass
class Incarnation:
    """One run of a worker process in a slot (a slot is restarted when its process dies)."""

    slot: int
    number: int
    log: Path
    process: BaseProcess
    crash_at: int | None
    killed_at: float | None = None  # monotonic; set when the test killed it from outside

    @property
    def handouts_logged(self) -> int:
        return sum(line["event"] == "handed" for line in log_lines(self.log))


@dataclass
class Crew:
    """The worker processes of one run: started, killed and restarted by the test."""

    root: Path
    url: str
    lake_dir: str
    rng: random.Random
    runs: list[Incarnation] = field(default_factory=list)
    context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))

    def start(self, slot: int) -> Incarnation:
        """A process in ``slot``, armed by chance to die before one of its first acknowledges."""
        armed = self.rng.random() < CRASH_CHANCE
        return self.start_armed(slot, self.rng.randint(1, 3) if armed else None)

    def start_armed(self, slot: int, crash_at: int | None) -> Incarnation:
        """A process in ``slot`` that dies before its ``crash_at``-th acknowledge."""
        number = len(self.runs)
        log = self.root / f"worker-{slot}-{number}.jsonl"
        spec = {
            "lake": self.lake_dir,
            "url": self.url,
            "final": str(self.root / "final"),
            "log": str(log),
            "crash_at": crash_at,
        }
        # spawned, not forked: delta-rs's runtime does not survive a fork
        process = self.context.Process(target=consume_until_final, args=(spec,))
        process.start()
        run = Incarnation(slot, number, log, process, crash_at)
        self.runs.append(run)
        return run

    def current(self) -> list[Incarnation]:
        """The latest incarnation of each slot."""
        latest: dict[int, Incarnation] = {}
        for run in self.runs:
            latest[run.slot] = run
        return list(latest.values())

    def restart_dead(self) -> None:
        """Start a new process in each slot whose process was killed or crashed."""
        for run in self.current():
            code = run.process.exitcode
            if code is None or code == 0:
                continue
            assert code == -signal.SIGKILL, f"worker {run.number} failed (exit code {code})"
            self.start(run.slot)

    def wait_for(self, done: Callable[[], bool], what: str) -> None:
        """Restart dead workers until ``done``; fail after a generous deadline."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not done():
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            self.restart_dead()
            time.sleep(0.02)

    def handouts_seen(self) -> dict[int, int]:
        """How many handouts each incarnation has logged so far."""
        return {run.number: run.handouts_logged for run in self.runs}

    def handed_out_up_to(self, version: int) -> bool:
        """Whether a handout logged so far reaches ``version``."""
        return any(line["end"] >= version for run in self.runs for line in log_lines(run.log))

    def kill_next_holder(self, seen: dict[int, int]) -> None:
        """Wait for a handout logged since ``seen`` by a live worker and SIGKILL that worker
        at once: it dies in its block (before, during or after its append) or just after."""
        victim: list[Incarnation] = []

        def handed_out() -> bool:
            for run in self.current():
                fresh = run.handouts_logged > seen.get(run.number, 0)
                if fresh and run.process.exitcode is None:
                    victim.append(run)
                    return True
            return False

        self.wait_for(handed_out, "a handout to a live worker")
        victim[0].process.kill()
        victim[0].process.join()
        victim[0].killed_at = time.monotonic()

    def stop_all(self) -> None:
        for run in self.runs:
            if run.process.exitcode is None:
                run.process.kill()
            run.process.join()


@dataclass
class Handout:
    """A range handed to one incarnation: when (monotonic), until when (store clock), and
    when its append returned and whether it committed; whether it was acknowledged."""

    run: int
    start: int
    end: int
    handed_at: float
    held_until: float
    written_at: float | None = None  # None: killed before its append returned
    committed: bool | None = None
    acknowledged: bool = False


def handouts(crew: Crew) -> list[Handout]:
    """Every handout the workers logged, in the order they were handed out."""
    found = []
    for run in crew.runs:
        mine: list[Handout] = []
        for line in log_lines(run.log):
            if line["event"] == "handed":
                mine.append(
                    Handout(run.number, line["start"], line["end"], line["at"], line["held_until"])
                )
                continue
            last = mine[-1]
            assert (last.start, last.end) == (line["start"], line["end"])
            if line["event"] == "written":
                last.written_at, last.committed = line["at"], line["committed"]
            else:
                last.acknowledged = True
        found.extend(mine)
    return sorted(found, key=lambda handout: handout.handed_at)


def change_keys(rows: pa.Table) -> Counter[tuple[int, str, int]]:
    """The multiset of (key, change type, commit version) of change rows."""
    return Counter(
        zip(
            rows.column("id").to_pylist(),
            rows.column("_change_type").to_pylist(),
            rows.column("_commit_version").to_pylist(),
            strict=True,
        )
    )


@pytest.fixture
def crew_factory(tmp_path: Path) -> Iterator[Callable[[str, int], Crew]]:
    crews: list[Crew] = []

    def make(url: str, seed: int) -> Crew:
        crews.append(Crew(tmp_path, url, str(tmp_path / "lake"), random.Random(seed)))
        return crews[-1]

    yield make
    for crew in crews:
        crew.stop_all()  # only the processes this test started


def test_a_block_that_raises_gives_its_range_back_and_a_busy_one_says_who_holds_it(
    tmp_path: Path,
) -> None:
    lake = LakeResource(lake_dir=str(tmp_path / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}")
    version = land(lake.table(SOURCE), source_commits(random.Random(0))[0])
    with pytest.raises(RuntimeError, match="stopped"):
        with consume_changes(lake, checkpoint, SOURCE, CONSUMER, lease_seconds=600) as changes:
            assert (changes.start, changes.end) == (0, version)
            raise RuntimeError("stopped before writing")
    with consume_changes(lake, checkpoint, SOURCE, CONSUMER, lease_seconds=600) as taken:
        assert (taken.start, taken.end) == (0, version)  # at once, not after 600 s
        with consume_changes(lake, checkpoint, SOURCE, CONSUMER) as busy:
            assert busy.empty and busy.busy and busy.rows.num_rows == 0
            held = changes_metadata(busy, None)
        assert held["change_rows"] == 0 and held["versions"].startswith("held by ")
        written = append_changes(lake.table(OUTPUT), taken, CONSUMER)
    assert written is not None and written.rows_written == taken.rows.num_rows
    with open_store(checkpoint.resolved_url) as store:
        assert ChangeFeed(store, CONSUMER, lake.table(SOURCE)).acknowledged() == version


def test_a_renewed_lease_keeps_the_range_until_it_lapses_and_a_lapsed_one_cannot_be_renewed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    source = LakeResource(lake_dir=str(tmp_path / "lake")).table(SOURCE)
    version = land(source, source_commits(random.Random(0))[0])
    clock = stepped_from(url)
    with open_store(url, clock=clock) as store:
        first = ChangeFeed(store, CONSUMER, source, lease_seconds=10, holder="first")
        second = ChangeFeed(store, CONSUMER, source, lease_seconds=10, holder="second")
        taken = first.pending()
        assert (taken.start, taken.end, taken.held_until) == (0, version, clock.now + 10)
        clock.advance(8)
        assert first.renew()  # held until 18 s from the start now, not 10
        clock.advance(4)
        busy = second.pending()
        assert busy.busy and busy.holder == "first"
        assert busy.held_until == pytest.approx(clock.now + 6)
        assert not second.renew()  # a feed holding nothing has nothing to renew
        clock.advance(7)  # past the renewed lease: the range goes to the next holder
        replay = second.pending()
        assert (replay.start, replay.end, replay.holder) == (0, version, "second")
        assert not first.renew()  # its lease lapsed and another holder took the range
        second.acknowledge(replay.end)
        assert not second.renew() and first.acknowledged() == version


def test_a_block_running_past_its_lease_keeps_its_range_while_it_runs(tmp_path: Path) -> None:
    lake = LakeResource(lake_dir=str(tmp_path / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}")
    version = land(lake.table(SOURCE), source_commits(random.Random(0))[0])

    def lease_end() -> float | None:
        with open_store(checkpoint.resolved_url) as store:
            memo = store.memos(OFFSETS_SCOPE, [CONSUMER])[CONSUMER]
        return memo.value.get("lease_expires_at")

    with consume_changes(lake, checkpoint, SOURCE, CONSUMER, lease_seconds=2) as taken:
        assert (taken.start, taken.end) == (0, version) and taken.held_until is not None
        # The block's heartbeat moves the lease on while the block runs (waited for as an
        # event, however slow the machine): twice past where it was handed out.
        renewed = wait_until(
            lambda: (end := lease_end()) is not None and end > taken.held_until + 2 and end,
            "the lease renewed past two of its lengths",
        )
        assert renewed > taken.held_until
    with open_store(checkpoint.resolved_url) as store:
        assert ChangeFeed(store, CONSUMER, lake.table(SOURCE)).acknowledged() == version
    assert lease_end() is None  # acknowledged: no lease left behind


RUNS = [
    pytest.param("sqlite", 1, id="sqlite-seed1"),
    pytest.param("sqlite", 2, id="sqlite-seed2"),
    pytest.param("postgresql", 3, id="postgresql-seed3", marks=pytest.mark.postgres),
]


@pytest.mark.parametrize(("backend", "seed"), RUNS)
def test_consumers_sharing_a_name_take_each_change_once_through_kills(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    crew_factory: Callable[[str, int], Crew],
    backend: str,
    seed: int,
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'state' / 'checkpoint.db'}"
    else:
        url = str(request.getfixturevalue("fresh_postgres_url"))
    crew = crew_factory(url, seed)
    lake = LakeResource(lake_dir=crew.lake_dir)
    source = lake.table(SOURCE)
    commits = source_commits(crew.rng)
    first_version = land(source, commits[0])

    # The first worker dies between its append and its acknowledge: its range must be
    # handed out again, once its lease is over, and the replayed append commit nothing.
    first = crew.start_armed(0, crash_at=1)
    first.process.join(DEADLINE_SECONDS)
    assert first.process.exitcode == -signal.SIGKILL, (
        f"the armed worker, after up to {DEADLINE_SECONDS:.0f} s, exited with "
        f"{first.process.exitcode} (None: still running); it logged {log_lines(first.log)}"
    )
    assert [(h.start, h.end, h.committed) for h in handouts(crew)] == [(0, first_version, True)]

    for slot in range(SLOTS):
        crew.start(slot)
    plan = random.Random(seed)  # what happens after each commit, apart from restarts
    kill_after = set(plan.sample(range(1, COMMITS), EXTERNAL_KILLS))
    for number in range(1, COMMITS):
        # counted before the commit lands: a handout covering it is then certain to come
        seen = crew.handouts_seen()
        version = land(source, commits[number])
        if number in kill_after:
            crew.kill_next_holder(seen)
        elif plan.random() < PACED:  # else the next commit lands at once: a longer range
            reached = partial(crew.handed_out_up_to, version)
            crew.wait_for(reached, f"a handout reaching version {version}")
        crew.restart_dead()
    table = source.open()
    assert table is not None
    newest = table.version()
    (tmp_path / "final.partial").write_text(str(newest))
    (tmp_path / "final.partial").replace(tmp_path / "final")
    crew.wait_for(
        lambda: all(run.process.exitcode == 0 for run in crew.current()),
        "every worker to reach the newest version",
    )

    with open_store(url) as store:
        assert ChangeFeed(store, CONSUMER, source).acknowledged() == newest
    output = read_rows(lake.table(OUTPUT).open())
    assert change_keys(output) == change_keys(change_rows(source, 0))

    given = handouts(crew)
    # The ranges tile the versions: each handed out again only whole (a replay).
    ranges = sorted({(h.start, h.end) for h in given})
    assert ranges[0][0] == 0 and ranges[-1][1] == newest
    assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:], strict=False))
    replays = [h for h in given[1:] if (h.start, h.end) == (0, first_version)]
    # the crashed append was recognised: no replay committed (None: killed before it knew)
    assert False in {h.committed for h in replays} and True not in {h.committed for h in replays}
    # A range is handed out again only when its holder died unacknowledged, once that
    # holder's lease is over (on the store clock that handed it out), and after the holder
    # stopped: killed from outside (killed_at), or at its crash point right after its append.
    runs = {run.number: run for run in crew.runs}
    died = {number for number, run in runs.items() if run.process.exitcode == -signal.SIGKILL}
    for index, later in enumerate(given):
        for earlier in given[:index]:
            if (earlier.start, earlier.end) != (later.start, later.end):
                continue
            assert earlier.run in died and not earlier.acknowledged, f"{later} after {earlier}"
            taken_at = later.held_until - LEASE_SECONDS
            assert taken_at >= earlier.held_until - 1e-3, f"{later} taken within {earlier}'s lease"
            stopped = runs[earlier.run].killed_at or earlier.written_at
            assert stopped is not None and stopped < later.handed_at, f"{earlier} was live"
    assert sum(run.killed_at is not None for run in crew.runs) == EXTERNAL_KILLS
