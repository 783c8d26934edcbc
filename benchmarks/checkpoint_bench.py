"""Durable tracker transitions per second: the checkpoint store vs a whole-JSON-file checkpoint.

Run: `.venv/bin/python -m benchmarks.checkpoint_bench [--quick] [--pg-url URL]`.
Each size registers N records, then drains them with claim (batches) + succeed (one
commit per record), so every transition is committed before the next one starts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from idem_assets.checkpoint import open_store
from idem_assets_tests.fixtures.postgres import running_postgres

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATA_DIR = Path(__file__).resolve().parent / ".data"
FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
SCOPE_PREFIX = "bench"


@dataclass
class Run:
    """One backend at one size: seconds spent and whether it finished."""

    backend: str
    records: int
    register_s: float
    drain_s: float
    transitions_done: int
    finished: bool

    @property
    def drain_total_s(self) -> float:
        """Drain time, extrapolated linearly from the changes done when the budget ran out."""
        if self.finished:
            return self.drain_s
        return self.drain_s / max(1, self.transitions_done) * 2 * self.records

    @property
    def us_per_record(self) -> float:
        """Register + claim + succeed cost per record, in microseconds."""
        return (self.register_s + self.drain_total_s) / self.records * 1e6

    @property
    def transitions_per_s(self) -> float:
        """Committed claim and succeed transitions per second."""
        return self.transitions_done / self.drain_s if self.drain_s else float("inf")


def bench_store(backend: str, url: str, records: int, batch: int) -> Run:
    """Register, then claim in batches and succeed one record per commit."""
    scope = f"{SCOPE_PREFIX}/{uuid.uuid4().hex}"
    with open_store(url) as store:
        started = time.perf_counter()
        store.register(scope, ((f"rec-{n:07d}", {"n": n}) for n in range(records)))
        registered = time.perf_counter()
        done = 0
        while claims := store.claim(scope, "bench", lease_seconds=300, limit=batch):
            done += len(claims)
            for claim in claims:
                store.succeed(claim, {"ok": True})
                done += 1
        finished = time.perf_counter()
        assert store.counts(scope)["succeeded"] == records
    return Run(backend, records, registered - started, finished - registered, done, True)


def bench_json_file(path: Path, records: int, batch: int, budget_s: float) -> Run:
    """The pattern seen in the wild: load, modify and rewrite the whole file per status change."""

    def load() -> dict[str, dict[str, object]]:
        return json.loads(path.read_text(encoding="utf-8"))

    def save(state: dict[str, dict[str, object]]) -> None:
        # Not even atomic or fsynced, as in the wild; a real durable version would cost more.
        path.write_text(json.dumps(state), encoding="utf-8")

    started = time.perf_counter()
    save(
        {
            f"rec-{n:07d}": {"status": "pending", "attempts": 0, "payload": {"n": n}}
            for n in range(records)
        }
    )
    registered = time.perf_counter()
    done, deadline = 0, registered + budget_s
    while time.perf_counter() < deadline:
        pending = [key for key, tracker in load().items() if tracker["status"] == "pending"]
        if not pending:
            break
        for key in pending[:batch]:
            for status in ("in_progress", "succeeded"):
                state = load()
                state[key]["status"] = status
                state[key]["attempts"] = int(state[key]["attempts"]) + (status == "in_progress")
                save(state)
                done += 1
            if time.perf_counter() >= deadline:
                break
    finished_at = time.perf_counter()
    return Run(
        "json-file",
        records,
        registered - started,
        finished_at - registered,
        done,
        done == 2 * records,
    )


@contextmanager
def postgres_url(given: str | None) -> Iterator[tuple[str, str]]:
    """The given database, or a fresh durable (fsync on) throwaway server; plus a description."""
    if given:
        yield given, "given server"
        return
    with running_postgres(durable=True) as server:
        kind = "throwaway server, fsync=on, synchronous_commit=on"
        yield server.create_database("idem_bench"), kind


def drop_bench_rows(url: str) -> None:
    """Remove this benchmark's trackers from a database it did not create."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM checkpoint_trackers WHERE scope LIKE %s", (f"{SCOPE_PREFIX}/%",))


def markdown(runs: list[Run], notes: list[str]) -> str:
    """The results table plus the conditions it was measured under."""
    lines = [
        "# Checkpoint store benchmark",
        "",
        "| backend | records | register s | claim+succeed s | transitions/s | µs per record "
        "| status |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for run in runs:
        status = (
            "complete"
            if run.finished
            else (
                f"timed out after {run.drain_s:.1f} s at {run.transitions_done:,}/"
                f"{2 * run.records:,} changes; total extrapolated"
            )
        )
        drain = f"{run.drain_total_s:,.2f}" + ("" if run.finished else " (extrapolated)")
        lines.append(
            f"| {run.backend} | {run.records:,} | {run.register_s:.3f} | {drain} | "
            f"{run.transitions_per_s:,.0f} | {run.us_per_record:,.0f} | {status} |"
        )
    return "\n".join([*lines, "", *[f"- {note}" for note in notes], ""])


def plot(runs: list[Run], path: Path) -> None:
    """Per-record cost against size, log-log; extrapolated points drawn hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for backend in dict.fromkeys(run.backend for run in runs):
        mine = [run for run in runs if run.backend == backend]
        (line,) = axes.plot(
            [r.records for r in mine], [r.us_per_record for r in mine], marker="o", label=backend
        )
        guessed = [r for r in mine if not r.finished]
        axes.scatter(
            [r.records for r in guessed],
            [r.us_per_record for r in guessed],
            s=90,
            facecolors="white",
            edgecolors=line.get_color(),
            zorder=3,
            label=f"{backend} (extrapolated)" if guessed else None,
        )
    axes.set(
        xscale="log",
        yscale="log",
        xlabel="records per scope",
        ylabel="µs per record (register + claim + succeed)",
        title="Durable checkpoint cost per record",
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    """Run every backend at every size, print the table, write markdown and PNG."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k only, short budgets")
    parser.add_argument("--pg-url", help="use this PostgreSQL database instead of starting one")
    parser.add_argument("--batch", type=int, default=100, help="records per claim")
    parser.add_argument("--json-budget", type=float, help="seconds per size for the JSON file")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    budget = args.json_budget or (4.0 if args.quick else 30.0)

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=DATA_DIR))
    runs: list[Run] = []
    try:
        with ExitStack() as stack:
            pg_url, pg_kind = stack.enter_context(postgres_url(args.pg_url))
            for size in sizes:
                runs.append(
                    bench_store(
                        "sqlite", f"sqlite:///{work / f'store-{size}.db'}", size, args.batch
                    )
                )
                runs.append(bench_store("postgresql", pg_url, size, args.batch))
                runs.append(
                    bench_json_file(work / f"checkpoint-{size}.json", size, args.batch, budget)
                )
                print(f"{size:,} records done", flush=True)
            if args.pg_url:
                drop_bench_rows(pg_url)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    notes = [
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, PostgreSQL: {pg_kind}.",
        "Store: one register call, then claims of "
        f"{args.batch} records and one committed succeed per record (SQLite WAL, "
        "synchronous=FULL). transitions/s counts claim + succeed transitions.",
        "json-file: one rewrite for the registration, then load + modify + rewrite of the "
        "whole file for every status change (no fsync, no atomic rename: cheaper and less "
        f"safe than the store). Budget {budget:.0f} s per size; past it the total is "
        "extrapolated linearly from the measured per-change cost.",
    ]
    table = markdown(runs, notes)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "checkpoint.md").write_text(table, encoding="utf-8")
    plot(runs, args.out / "checkpoint.png")


if __name__ == "__main__":
    main()
