"""A seeded soak: random runs, races, kills, late files and faults, checked at quiet points.

``python -m idem_assets_tests.reliability.soak --seed S --operations N [--root DIR]``
replays a soak exactly (the same seed gives the same operations and faults). Over ten days
of generated landing files it draws operations: a day's run, a single-run range, two runs
racing on overlapping days, a run SIGKILLed at a random moment, a late file or a
re-delivered file landing, a notification run against a service injecting faults, and a
compaction running beside a run. Every ``quiet_every`` operations (and at the end) it moves
the store's clock past every lease held (the runs' clock, ``clock_ahead``: no lease is
waited out), runs every day once more and notifies every day, then compares the lake
with a clean rebuild from the same landing files (fingerprints, duplicate, lost and extra
keys per table) and the service's deliveries with the keys the clean orders call for
(each delivered exactly once). It prints the seed, the operations, the faults and one
comparison row per quiet point.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idem_assets.checkpoint import Status
from idem_assets.defs.notifications.assets import notification_records, scope_of
from idem_assets.lake import read_rows
from idem_assets.lake.maintenance import compact
from idem_assets.notify import Faults, NotificationClient, NotificationServer
from idem_assets.sample.generator import generate, write_late_orders
from idem_assets_tests.checkpoint.clock import lease_lead
from idem_assets_tests.harness import START, Project
from idem_assets_tests.reliability.world import (
    Child,
    Comparison,
    compare_lakes,
    project_at,
    spawn_runs,
    trackers,
)
from idem_assets_tests.waiting import alive, wait_until

DAYS = 10
LAKE_JOB = "daily_lake_job"
NOTIFY_JOB = "notifications_job"
TOKEN = "soak-notify-token-5c1d"
WRITE_LEASE_SECONDS = 2.0
NOTIFY_CONFIG = {
    "ops": {
        "notifications": {
            "config": {"lease_seconds": 1.0, "batch_size": 5, "retry_in_seconds": 0.0}
        }
    }
}
# Operation -> weight.
OPERATIONS = {
    "day": 30,
    "range": 15,
    "pair": 12,
    "kill": 12,
    "late_file": 8,
    "redelivery": 5,
    "notify_faults": 10,
    "compact_beside_run": 8,
}
FAULT_TABLES = ("orders", "customers", "events", "daily_sales", "quarantine")


@dataclass
class QuietPoint:
    """The comparison at one quiet point."""

    after: int
    lake: Comparison
    notification_duplicates: int
    notifications_lost: int
    notifications_expected: int
    deliveries: int

    @property
    def holds(self) -> bool:
        """Lake equal to the clean rebuild, and every expected key delivered exactly once."""
        return (
            self.lake.equal
            and self.lake.lost == 0
            and self.notification_duplicates == 0
            and self.notifications_lost == 0
        )


@dataclass
class SoakReport:
    """What a soak did and found."""

    seed: int
    operations: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    quiet_points: list[QuietPoint] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """Whether every quiet point held."""
        return bool(self.quiet_points) and all(q.holds for q in self.quiet_points)

    def table(self) -> str:
        """The comparison rows, as printed."""
        lines = [
            "| after op | lake equal | duplicates | lost | extra | differing | notif. dup | "
            "notif. lost | expected keys | deliveries |",
            "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        for q in self.quiet_points:
            lines.append(
                f"| {q.after} | {'yes' if q.lake.equal else 'NO'} | {q.lake.duplicates} | "
                f"{q.lake.lost} | {q.lake.extra} | {', '.join(q.lake.differing) or '-'} | "
                f"{q.notification_duplicates} | {q.notifications_lost} | "
                f"{q.notifications_expected} | {q.deliveries} |"
            )
        return "\n".join(lines)

    def summary(self) -> str:
        """Seed, operations, faults and the table."""
        ops = Counter(op.split(" ", 1)[0] for op in self.operations)
        return "\n".join(
            [
                f"soak seed {self.seed}: {len(self.operations)} operations "
                f"(replay: python -m idem_assets_tests.reliability.soak --seed {self.seed} "
                f"--operations {len(self.operations)})",
                "operations: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())),
                "faults: "
                + (", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"),
                self.table(),
            ]
        )


def _day(index: int) -> str:
    return (START + dt.timedelta(days=index)).isoformat()


class Soak:
    """One seeded soak over a root folder (landing, lake, state, work)."""

    def __init__(self, root: Path, seed: int, server: NotificationServer) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.server = server
        self.report = SoakReport(seed)
        self.landing = root / "landing"
        generate(self.landing, START, DAYS, seed)
        self.project = project_at(root / "soak", self.landing)
        self.work = root / "work"
        self.redeliveries = 0
        # How far every run's store clock is ahead of the database's; only ever moved
        # forward, at quiet points, so no run's clock is behind an earlier one's.
        self.clock_ahead = 0.0

    # -- operations -------------------------------------------------------------------

    def _spawn(self, runs: list[Any], job: str = LAKE_JOB, **spec: Any) -> Child:
        if job == NOTIFY_JOB:
            spec.setdefault("run_config", NOTIFY_CONFIG)
        return spawn_runs(
            self.project,
            self.work,
            job,
            runs,
            token=TOKEN,
            notify_url=self.server.url,
            write_lease_seconds=WRITE_LEASE_SECONDS,
            clock_ahead=self.clock_ahead,
            **spec,
        )

    def _some_runs(self) -> list[Any]:
        """One to three partitions or ranges, run one after the other by one process."""
        out: list[Any] = []
        for _ in range(self.rng.randint(1, 3)):
            first = self.rng.randrange(DAYS)
            if self.rng.random() < 0.3:
                last = min(DAYS - 1, first + self.rng.randint(1, 4))
                out.append([_day(first), _day(last)])
            else:
                out.append(_day(first))
        return out

    def step(self, op: str) -> str:
        """Perform one operation other than a plain run; its description."""
        if op == "pair":
            return self._pair()
        if op == "kill":
            return self._kill()
        if op == "late_file":
            day = START + dt.timedelta(days=self.rng.randrange(DAYS))
            path = write_late_orders(self.landing, day, self.rng.randrange(10**6), 3)
            self.report.faults["late file"] += 1
            return f"late_file {path.name}"
        if op == "redelivery":
            return self._redeliver()
        if op == "notify_faults":
            return self._notify_with_faults()
        if op == "compact_beside_run":
            return self._compact_beside_run()
        raise ValueError(op)

    def _pair(self) -> str:
        go = self.work / f"go-{time.monotonic_ns()}"
        ready = [Path(f"{go}.ready{i}") for i in range(2)]
        runs = [self._some_runs(), self._some_runs()]
        children = [
            self._spawn(r, go_file=str(go), ready_file=str(flag))
            for r, flag in zip(runs, ready, strict=True)
        ]
        wait_until(
            lambda: (
                all(alive(c.process, "a child of the pair", c.stderr_tail) for c in children)
                and all(flag.exists() for flag in ready)
            ),
            "both children of the pair to be ready",
            seen=lambda: [flag.name for flag in ready if flag.exists()],
            every=0.01,
        )
        go.touch()
        for child in children:
            child.wait()
        self.report.faults["concurrent pair"] += 1
        return f"pair {runs[0]} | {runs[1]}"

    def _kill(self) -> str:
        runs = self._some_runs()
        child = self._spawn(runs)
        delay = self.rng.uniform(0.5, 6.0)
        time.sleep(delay)
        killed = child.process.poll() is None
        if killed:
            child.process.kill()
            self.report.faults["SIGKILL"] += 1
        child.wait()
        return f"kill {runs} after {delay:.1f} s ({'killed' if killed else 'had finished'})"

    def _redeliver(self) -> str:
        folder = self.landing / "orders" / f"date={_day(self.rng.randrange(DAYS))}"
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        source = self.rng.choice(files)
        self.redeliveries += 1
        copy = folder / f"redelivered-{self.redeliveries}-{source.name}"
        shutil.copyfile(source, copy)
        self.report.faults["re-delivery"] += 1
        return f"redelivery {copy.relative_to(self.landing)}"

    def _notify_with_faults(self) -> str:
        faults = Faults(
            error_rate=self.rng.choice([0.0, 0.2, 0.4]),
            error_after_delivery_rate=self.rng.choice([0.0, 0.2, 0.3]),
            latency_ms=self.rng.choice([0.0, 20.0]),
            seed=self.rng.randrange(10**6),
        )
        self.server.set_faults(faults)
        days = sorted({_day(self.rng.randrange(DAYS)) for _ in range(self.rng.randint(1, 3))})
        try:
            self._spawn(days, job=NOTIFY_JOB).wait()
        finally:
            self.server.set_faults(Faults())
        self.report.faults["notification faults"] += 1
        return (
            f"notify_faults {days} (503 {faults.error_rate:.0%}, "
            f"502 after delivery {faults.error_after_delivery_rate:.0%})"
        )

    def _compact_beside_run(self) -> str:
        runs = self._some_runs()
        child = self._spawn(runs)
        table = self.rng.choice(FAULT_TABLES)
        target = self.project.lake.table(table)
        compacted = 0
        while child.process.poll() is None:
            if target.exists():
                compacted += int(compact(target).committed)
            time.sleep(0.2)
        child.wait()
        self.report.faults["compaction beside a run"] += 1
        return f"compact_beside_run {table} x{compacted} beside {runs}"

    # -- quiet points -----------------------------------------------------------------

    def quiet_point(self, after: int) -> QuietPoint:
        """Converge (every day once, every day notified) and compare with a clean rebuild."""
        self._past_leases()
        all_days = [_day(i) for i in range(DAYS)]
        converge = self._spawn([[all_days[0], all_days[-1]]]).wait()
        assert converge.runs and converge.runs[0]["success"], converge.tail()
        for _ in range(3):  # a record whose attempt failed under faults is due again at once
            notified = self._spawn(all_days, job=NOTIFY_JOB).wait()
            assert len(notified.runs) == DAYS, notified.tail()
            if self._notifications_settled():
                break
            self._past_leases()

        clean_root = self.root / f"clean-{after}"
        clean = project_at(clean_root, self.landing)
        rebuilt = spawn_runs(
            clean, clean_root / "work", LAKE_JOB, [[all_days[0], all_days[-1]]]
        ).wait()
        assert rebuilt.runs and rebuilt.runs[0]["success"], rebuilt.tail()
        lake = compare_lakes(self.project.lake, clean.lake)

        expected = self._expected_keys(clean)
        counts = NotificationClient(self.server.url, TOKEN).delivery_counts()
        point = QuietPoint(
            after=after,
            lake=lake,
            notification_duplicates=sum(n - 1 for n in counts.values()),
            notifications_lost=len(expected - set(counts)),
            notifications_expected=len(expected),
            deliveries=sum(counts.values()),
        )
        self.report.quiet_points.append(point)
        shutil.rmtree(clean_root, ignore_errors=True)
        return point

    def _past_leases(self) -> None:
        """Move the runs' clock past every lease held now (a killed run's), never back."""
        url = self.project.checkpoint.resolved_url
        self.clock_ahead = max(self.clock_ahead, lease_lead(url))

    def _notifications_settled(self) -> bool:
        url = self.project.checkpoint.resolved_url
        return all(
            t.status is Status.SUCCEEDED
            for i in range(DAYS)
            for t in trackers(url, scope_of(START + dt.timedelta(days=i)))
        )

    @staticmethod
    def _expected_keys(clean: Project) -> set[str]:
        orders = read_rows(clean.lake.table("orders").open())
        return {
            record.key
            for i in range(DAYS)
            for record in notification_records(orders, START + dt.timedelta(days=i))
        }

    def run(self, operations: int, quiet_every: int) -> SoakReport:
        """Draw and perform ``operations`` operations, with quiet points between.

        Consecutive plain runs (a day, a range) share one process, up to three, as a
        worker runs its queue; every other operation stands alone.
        """
        names, weights = list(OPERATIONS), list(OPERATIONS.values())
        queued: list[Any] = []

        def flush() -> None:
            if queued:
                self._spawn(list(queued)).wait()
                queued.clear()

        for number in range(1, operations + 1):
            op = self.rng.choices(names, weights)[0]
            if op in ("day", "range"):
                run = self._plain_run(op)
                queued.append(run)
                self.report.operations.append(f"{op} {run}")
                if len(queued) == 3:
                    flush()
            else:
                flush()
                self.report.operations.append(self.step(op))
            if number % quiet_every == 0 or number == operations:
                flush()
                self.quiet_point(number)
        return self.report

    def _plain_run(self, op: str) -> Any:
        """A day's partition key, or a ``[first, last]`` range."""
        if op == "day":
            return _day(self.rng.randrange(DAYS))
        first = self.rng.randrange(DAYS - 1)
        return [_day(first), _day(self.rng.randrange(first + 1, DAYS))]


def soak(seed: int, operations: int, root: Path, quiet_every: int = 30) -> SoakReport:
    """Run one soak under ``root`` with a notification service of its own."""
    root.mkdir(parents=True, exist_ok=True)
    with NotificationServer(root / "notify.db", TOKEN) as server:
        return Soak(root, seed, server).run(operations, quiet_every)


def main(argv: list[str] | None = None) -> int:
    """Replay a soak from its seed; exit 1 if a quiet point did not hold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--operations", type=int, default=60)
    parser.add_argument("--quiet-every", type=int, default=30)
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="idem-soak-"))
    report = soak(args.seed, args.operations, root, args.quiet_every)
    print(report.summary())
    print(json.dumps({"holds": report.holds, "root": str(root)}))
    return 0 if report.holds else 1


if __name__ == "__main__":
    raise SystemExit(main())
