"""Headless demo: materialize two weeks of every asset twice and show nothing changed.

``python -m idem_assets.demo --start 2024-03-01 --days 14`` runs the days through the daily
job as one single-run backfill (one run, one commit per table, its checks evaluated per
day), then the catalog job, then the TPC-H domain (its laid-out days as one single-run
backfill, and its customer snapshot) when its landing files are there, and does it all a
second time. It prints a line as each run finishes, then one line per asset and run with
rows, Delta version, fingerprint and each check's results over the run's days (``ok``,
``WARN k/n (days)`` for failed checks of severity WARN, ``FAIL`` for failed ERROR
checks), then whole-table fingerprints after each pass, and exits non-zero unless the
second pass reproduced the first and no ERROR check failed.

While it works it says so: its first line comes before the code location loads; during a
run, an indented line per asset write and per finished step as they happen (read from the
run's events in the instance); and ``still …`` whenever nothing was printed for
``IDEM_PROGRESS_SECONDS`` (4 s by default). Dagster's own console stays at ERROR; on an
instance of the shipped profiles (``make demo``'s) a run's end and its failed checks print on
stderr, and ``IDEM_LOG_LEVEL=DEBUG make demo`` adds its step events
(``idem_assets/lib/console.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import uuid
import warnings
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from idem_assets.progress import Progress, RunSteps


def _command() -> int:
    """``python -m idem_assets.demo``: the first line before the code location loads (Dagster
    and the definitions take seconds on a busy machine) and ``still loading`` lines while it
    does; then this module, imported by name, runs its main() with the same progress."""
    with Progress.from_env() as startup:
        startup.say("demo: loading the code location…")
        with startup.phase("demo: ", "loading the code location"):
            from idem_assets import demo
        return demo.main(progress=startup)


if __name__ == "__main__":
    sys.exit(_command())

# The code location: loaded when the module is imported by name (as above, or by a test).
import dagster as dg  # noqa: E402

# Beta/preview notices about backfill policies and partitioned checks are noise here.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from idem_assets.definitions import defs  # noqa: E402
from idem_assets.lake import fingerprint, read_rows  # noqa: E402
from idem_assets.landing import list_days  # noqa: E402
from idem_assets.lib.console import CONSOLE_TAG  # noqa: E402
from idem_assets.lib.console import QUIET as QUIET_RUN  # noqa: E402
from idem_assets.partitions import RANGE_END_TAG, RANGE_START_TAG  # noqa: E402
from idem_assets.resources import LakeResource  # noqa: E402
from idem_assets.sample.sources import DEFS_DIR, ORDERS  # noqa: E402
from idem_assets.sources import load_source  # noqa: E402

# Dagster's own step logs would drown the table; errors still show (IDEM_LOG_LEVEL=DEBUG
# prints the step events through the instance profile's handler).
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
TABLES = ("orders", "customers", "events", "daily_sales", "product_catalog", "quarantine")
TPCH_DAILY = ("tpch_orders", "tpch_lineitem")
TPCH_TABLES = (*TPCH_DAILY, "tpch_customer")
UNPARTITIONED = "-"


@dataclass(frozen=True)
class Row:
    """One asset partition's outcome in one pass."""

    run: int
    asset: str
    partition: str
    rows: int
    duplicates: int
    quarantined: int | None
    version: int
    committed: bool
    proof: str
    fingerprint: str
    checks: str
    checks_passed: bool  # no failed ERROR check
    warnings: int


def _value(entry: object) -> object:
    return getattr(entry, "value", entry)


def _optional_int(entry: object) -> int | None:
    value = _value(entry)
    return None if value is None else int(value)  # type: ignore[arg-type]


def _outcome(evaluation: dg.AssetCheckEvaluation) -> str:
    if evaluation.passed:
        return "ok"
    return "WARN" if evaluation.severity == dg.AssetCheckSeverity.WARN else "FAIL"


def _summary(outcomes: list[tuple[str | None, str]]) -> str:
    """A check's outcome over a run's days: ``ok``, or e.g. ``WARN 2/14 (2026-11-21, …)``."""
    bad = sorted((day or "-", outcome) for day, outcome in outcomes if outcome != "ok")
    if not bad:
        return "ok"
    worst = "FAIL" if any(outcome == "FAIL" for _, outcome in bad) else "WARN"
    days = ", ".join(day for day, _ in bad[:3]) + (", …" if len(bad) > 3 else "")
    return f"{worst} {len(bad)}/{len(outcomes)} ({days})" if len(outcomes) > 1 else worst


def _rows_of(run: int, result: dg.ExecuteInProcessResult) -> list[Row]:
    """One row per asset the run materialized: its one write, and its checks per day.

    A ranged run reports a materialization per partition, each carrying the metadata of the
    run's one write; the checks are evaluated per partition and summarized here.
    """
    checks: dict[str, dict[str, list[tuple[str | None, str]]]] = {}
    for evaluation in result.get_asset_check_evaluations():
        by_name = checks.setdefault(evaluation.asset_key.to_user_string(), {})
        by_name.setdefault(evaluation.check_name, []).append(
            (evaluation.partition, _outcome(evaluation))
        )
    written: dict[str, tuple[list[str], dg.AssetMaterialization]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        asset = materialization.asset_key.to_user_string()
        days, _ = written.setdefault(asset, ([], materialization))
        if materialization.partition is not None:
            days.append(materialization.partition)
    rows = []
    for asset, (days, materialization) in written.items():
        md = materialization.metadata
        outcomes = checks.get(asset, {})
        results = {name: _summary(found) for name, found in sorted(outcomes.items())}
        label = UNPARTITIONED
        if days:
            first, last = min(days), max(days)
            label = first if first == last else f"{first}..{last[5:]}"
        rows.append(
            Row(
                run=run,
                asset=asset,
                partition=label,
                rows=int(_value(md["dagster/row_count"])),  # type: ignore[arg-type]
                duplicates=int(_value(md.get("duplicates_dropped", 0))),  # type: ignore[arg-type]
                quarantined=_optional_int(md.get("quarantined_rows")),
                version=int(_value(md["delta_version"])),  # type: ignore[arg-type]
                committed=bool(_value(md["committed"])),
                proof=str(_value(md.get("no_op_proof", ""))) or "-",
                fingerprint=str(_value(md["fingerprint"])),
                checks=" ".join(f"{name}={outcome}" for name, outcome in results.items()),
                checks_passed=all(not o.startswith("FAIL") for o in results.values()),
                warnings=sum(
                    outcome == "WARN" for found in outcomes.values() for _, outcome in found
                ),
            )
        )
    return rows


@dataclass(frozen=True)
class Runner:
    """Where the demo's runs execute (the instance) and where they say how far they got."""

    instance: dg.DagsterInstance
    progress: Progress

    def run(
        self, run: int, name: str, job: dg.JobDefinition, span: str = "", **options: Any
    ) -> dg.ExecuteInProcessResult:
        """Execute one run of ``job``: a line per asset write and per finished step as they
        happen, and the run's line (``pass N · name span · seconds``) when it ends."""
        run_id = str(uuid.uuid4())  # known before the run starts, so its events can be followed
        prefix = f"  pass {run} · {name} · "
        began = time.monotonic()
        steps = RunSteps(self.instance, run_id, prefix)
        with self.progress.phase(prefix, "starting the run", steps):
            # The demo reports its runs itself: no run lines of the instance's handler.
            tags = {CONSOLE_TAG: QUIET_RUN, **options.pop("tags", {})}
            result = job.execute_in_process(
                instance=self.instance, run_config=QUIET, run_id=run_id, tags=tags, **options
            )
        label = f"{name} {span}" if span else name
        self.progress.say(f"pass {run} · {label} · {time.monotonic() - began:.1f} s")
        return result


def run_range(
    runner: Runner,
    run: int,
    name: str,
    job: dg.JobDefinition,
    window: tuple[str, str],
    **options: Any,
) -> list[Row]:
    """The days of ``window`` (first, last) as one single-run backfill: one commit per table."""
    first, last = window
    days = (dt.date.fromisoformat(last) - dt.date.fromisoformat(first)).days + 1
    span = f"{first}..{last} (one run, {days} day{'' if days == 1 else 's'})"
    tags = {RANGE_START_TAG: first, RANGE_END_TAG: last}
    return _rows_of(run, runner.run(run, name, job, span, tags=tags, **options))


def tpch_window(lake: LakeResource) -> tuple[str, str] | None:
    """First and last day of the laid-out TPC-H orders that are partitions (the declaration
    ends them at IDEM_TPCH_LAST_DAY), or None without TPC-H files."""
    contract = load_source(DEFS_DIR / "tpch" / "orders" / "defs.yaml").contract()
    found = [d for d in list_days(lake.landing(), contract) if not contract.after_last_day(d)]
    return (found[0].isoformat(), found[-1].isoformat()) if found else None


def run_tpch(runner: Runner, run: int, window: tuple[str, str]) -> list[Row]:
    """The TPC-H days as one single-run backfill, then its customer snapshot."""
    daily_keys = [dg.AssetKey(a) for a in TPCH_DAILY]
    snapshot_keys = [dg.AssetKey("tpch_customer")]
    daily = defs.resolve_implicit_job_def_def_for_assets(daily_keys)
    snapshot = defs.resolve_implicit_job_def_def_for_assets(snapshot_keys)
    assert daily is not None and snapshot is not None
    ranged = run_range(
        runner, run, ", ".join(TPCH_DAILY), daily, window, asset_selection=daily_keys
    )
    customers = runner.run(run, "tpch_customer", snapshot, asset_selection=snapshot_keys)
    return [*ranged, *_rows_of(run, customers)]


def run_pass(
    runner: Runner, run: int, days: tuple[str, str], tpch: tuple[str, str] | None
) -> list[Row]:
    """Materialize the days (first, last) in one run, then the catalog, then TPC-H, once."""
    # One run for all the days: daily_lake_job's assets (orders, customers, events,
    # daily_sales) all have a single-run backfill policy. Notifications, which post to the
    # notification service, are not in the job.
    daily_job = defs.resolve_job_def("daily_lake_job")
    rows = run_range(runner, run, daily_job.name, daily_job, days)
    catalog_job = defs.resolve_job_def("catalog_job")
    rows.extend(_rows_of(run, runner.run(run, catalog_job.name, catalog_job)))
    if tpch is not None:
        rows.extend(run_tpch(runner, run, tpch))
    return rows


def table_fingerprints(lake: LakeResource, tables: tuple[str, ...]) -> dict[str, str]:
    """Whole-table fingerprints of lake tables."""
    prints = {}
    for name in tables:
        table = lake.table(name).open()
        prints[name] = str(fingerprint(read_rows(table))) if table is not None else "-"
    return prints


def _print_rows(rows: list[Row]) -> None:
    header = (
        f"{'pass':>4}  {'asset':<16} {'partition':<16} {'rows':>6} {'dups':>5} "
        f"{'quar':>4} {'ver':>4} {'commit':<6} {'no-op proof':<11} "
        f"{'fingerprint':<35} checks"
    )
    print(header)
    print("-" * len(header))
    for r in sorted(rows, key=lambda r: (r.run, r.asset, r.partition)):
        quarantined = "-" if r.quarantined is None else str(r.quarantined)
        print(
            f"{r.run:>4}  {r.asset:<16} {r.partition:<16} {r.rows:>6} {r.duplicates:>5} "
            f"{quarantined:>4} {r.version:>4} "
            f"{'yes' if r.committed else 'no':<6} {r.proof:<11} {r.fingerprint:<35} {r.checks}"
        )
    print(
        "(a ranged run writes all its days in one commit per table: a line per asset and run; "
        "each check is evaluated per day: WARN k/n names the days that warned)"
    )


def main(argv: list[str] | None = None, progress: Progress | None = None) -> int:
    """Run both passes and report; exit code 0 only if the second pass changed nothing.

    ``progress`` is the one the command's first line went to (a new one when None).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--start",
        default=None,
        type=dt.date.fromisoformat,
        help="first day (default: the first day with landing files)",
    )
    parser.add_argument("--days", default=14, type=int)
    args = parser.parse_args(argv)
    if args.days < 1:
        parser.error(f"--days must be at least 1, got {args.days}")
    with ExitStack() as stack:
        if progress is None:
            progress = stack.enter_context(Progress.from_env())
        with progress.phase("demo: ", "finding the landing days, opening the instance"):
            lake = LakeResource()
            start = args.start or min(list_days(lake.landing(), ORDERS), default=None)
            if start is None:
                parser.error(f"no landing data under {lake.landing_uri}; run `make sample-data`")
            days = (start.isoformat(), (start + dt.timedelta(days=args.days - 1)).isoformat())
            tpch = tpch_window(lake)
            tables = (*TABLES, *TPCH_TABLES) if tpch else TABLES
            instance = stack.enter_context(dg.DagsterInstance.get())
        runner = Runner(instance, progress)
        first = run_pass(runner, 1, days, tpch)
        with progress.phase("  pass 1 · ", "fingerprinting the tables"):
            after_first = table_fingerprints(lake, tables)
        second = run_pass(runner, 2, days, tpch)
        with progress.phase("  pass 2 · ", "fingerprinting the tables"):
            after_second = table_fingerprints(lake, tables)
    print()
    _print_rows(first + second)
    print()
    print(f"{'table':<16} {'after pass 1':<35} {'after pass 2':<35} equal")
    for name in tables:
        same = after_first[name] == after_second[name]
        print(
            f"{name:<16} {after_first[name]:<35} {after_second[name]:<35} {'yes' if same else 'NO'}"
        )
    prints_first = {(r.asset, r.partition): r.fingerprint for r in first}
    reproduced = prints_first == {(r.asset, r.partition): r.fingerprint for r in second}
    commits = sum(r.committed for r in second)
    checks_ok = all(r.checks_passed for r in first + second)
    tables_equal = after_first == after_second
    print()
    print(
        f"second pass fingerprints equal: {'yes' if reproduced else 'NO'}; "
        f"second pass commits: {commits}; "
        f"no ERROR check failed: {'yes' if checks_ok else 'NO'} "
        f"({sum(r.warnings for r in first + second)} WARN results); "
        f"tables equal: {'yes' if tables_equal else 'NO'}"
    )
    return 0 if reproduced and checks_ok and tables_equal and not commits else 1
