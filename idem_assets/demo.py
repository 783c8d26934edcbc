"""Headless demo: materialize two weeks of every asset twice and show nothing changed.

``python -m idem_assets.demo --start 2024-03-01 --days 14`` runs every daily partition
through the daily job (with its checks), then the catalog job, then the TPC-H domain (its
laid-out days as one single-run backfill, and its customer snapshot) when its landing files
are there, and does it all a second time. It prints one line per asset and partition with
rows, Delta version, fingerprint and check results (``ok``, ``WARN`` for a failed check of
severity WARN, ``FAIL`` for a failed ERROR check), then whole-table fingerprints after each
pass, and exits non-zero unless the second pass reproduced the first and no ERROR check
failed.
"""

import argparse
import datetime as dt
import sys
import warnings
from dataclasses import dataclass

import dagster as dg

# Beta/preview notices about backfill policies and partitioned checks are noise here.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from idem_assets.definitions import defs  # noqa: E402
from idem_assets.lake import fingerprint, read_rows  # noqa: E402
from idem_assets.landing import list_days  # noqa: E402
from idem_assets.partitions import RANGE_END_TAG, RANGE_START_TAG  # noqa: E402
from idem_assets.resources import LakeResource  # noqa: E402
from idem_assets.sample.sources import DEFS_DIR, ORDERS  # noqa: E402
from idem_assets.sources import load_source  # noqa: E402

# Dagster's own step logs would drown the table; errors still show.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
TABLES = ("orders", "customers", "events", "daily_sales", "product_catalog", "quarantine")
TPCH_DAILY = ("tpch_orders", "tpch_lineitem")
TPCH_TABLES = (*TPCH_DAILY, "tpch_customer")


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


def _rows_of(run: int, partition: str, result: dg.ExecuteInProcessResult) -> list[Row]:
    checks: dict[str, list[tuple[str, str]]] = {}
    for evaluation in result.get_asset_check_evaluations():
        outcome = (
            "ok"
            if evaluation.passed
            else ("WARN" if evaluation.severity == dg.AssetCheckSeverity.WARN else "FAIL")
        )
        checks.setdefault(evaluation.asset_key.to_user_string(), []).append(
            (evaluation.check_name, outcome)
        )
    rows = []
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        md = materialization.metadata
        asset = materialization.asset_key.to_user_string()
        results = sorted(checks.get(asset, []))
        rows.append(
            Row(
                run=run,
                asset=asset,
                partition=partition,
                rows=int(_value(md["dagster/row_count"])),  # type: ignore[arg-type]
                duplicates=int(_value(md.get("duplicates_dropped", 0))),  # type: ignore[arg-type]
                quarantined=_optional_int(md.get("quarantined_rows")),
                version=int(_value(md["delta_version"])),  # type: ignore[arg-type]
                committed=bool(_value(md["committed"])),
                proof=str(_value(md.get("no_op_proof", ""))) or "-",
                fingerprint=str(_value(md["fingerprint"])),
                checks=" ".join(f"{name}={outcome}" for name, outcome in results),
                checks_passed=all(outcome != "FAIL" for _, outcome in results),
                warnings=sum(outcome == "WARN" for _, outcome in results),
            )
        )
    return rows


def tpch_window(lake: LakeResource) -> tuple[str, str] | None:
    """First and last day of the laid-out TPC-H orders, or None without TPC-H files."""
    contract = load_source(DEFS_DIR / "tpch" / "orders" / "defs.yaml").contract()
    found = list_days(lake.landing(), contract)
    return (found[0].isoformat(), found[-1].isoformat()) if found else None


def run_tpch(run: int, window: tuple[str, str], instance: dg.DagsterInstance) -> list[Row]:
    """The TPC-H days as one single-run backfill, then its customer snapshot."""
    daily = defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey(a) for a in TPCH_DAILY])
    snapshot = defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey("tpch_customer")])
    assert daily is not None and snapshot is not None
    tags = {RANGE_START_TAG: window[0], RANGE_END_TAG: window[1]}
    ranged = daily.execute_in_process(
        instance=instance,
        tags=tags,
        run_config=QUIET,
        asset_selection=[dg.AssetKey(a) for a in TPCH_DAILY],
    )
    customers = snapshot.execute_in_process(
        instance=instance, run_config=QUIET, asset_selection=[dg.AssetKey("tpch_customer")]
    )
    # A ranged run reports each partition; its one write and its checks cover them all.
    label = f"{window[0]}..{window[1][5:]}"
    one_per_asset = {row.asset: row for row in _rows_of(run, label, ranged)}
    return [*one_per_asset.values(), *_rows_of(run, "-", customers)]


def run_pass(
    run: int, days: list[str], instance: dg.DagsterInstance, tpch: tuple[str, str] | None
) -> list[Row]:
    """Materialize every day, then the catalog, then TPC-H, once."""
    daily_job = defs.resolve_job_def("daily_lake_job")
    rows: list[Row] = []
    for key in days:
        result = daily_job.execute_in_process(
            partition_key=key, instance=instance, run_config=QUIET
        )
        rows.extend(_rows_of(run, key, result))
    catalog = defs.resolve_job_def("catalog_job").execute_in_process(
        instance=instance, run_config=QUIET
    )
    rows.extend(_rows_of(run, "-", catalog))
    if tpch is not None:
        rows.extend(run_tpch(run, tpch, instance))
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


def main(argv: list[str] | None = None) -> int:
    """Run both passes and report; exit code 0 only if the second pass changed nothing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--start",
        default=None,
        type=dt.date.fromisoformat,
        help="first day (default: the first day with landing files)",
    )
    parser.add_argument("--days", default=14, type=int)
    args = parser.parse_args(argv)
    lake = LakeResource()
    start = args.start or min(list_days(lake.landing(), ORDERS), default=None)
    if start is None:
        parser.error(f"no landing data under {lake.landing_uri}; run `make sample-data`")
    days = [(start + dt.timedelta(days=i)).isoformat() for i in range(args.days)]
    tpch = tpch_window(lake)
    tables = (*TABLES, *TPCH_TABLES) if tpch else TABLES
    with dg.DagsterInstance.get() as instance:
        first = run_pass(1, days, instance, tpch)
        after_first = table_fingerprints(lake, tables)
        second = run_pass(2, days, instance, tpch)
        after_second = table_fingerprints(lake, tables)
    _print_rows(first + second)
    print()
    print(f"{'table':<16} {'after pass 1':<35} {'after pass 2':<35} equal")
    for name in tables:
        same = after_first[name] == after_second[name]
        print(
            f"{name:<16} {after_first[name]:<35} {after_second[name]:<35} {'yes' if same else 'NO'}"
        )
    by_key = {(r.asset, r.partition): r for r in first}
    reproduced = all(by_key[(r.asset, r.partition)].fingerprint == r.fingerprint for r in second)
    no_commits = not any(r.committed for r in second)
    checks_ok = all(r.checks_passed for r in first + second)
    tables_equal = after_first == after_second
    print()
    print(
        f"second pass fingerprints equal: {'yes' if reproduced else 'NO'}; "
        f"second pass commits: {sum(r.committed for r in second)}; "
        f"no ERROR check failed: {'yes' if checks_ok else 'NO'} "
        f"({sum(r.warnings for r in first + second)} WARN results); "
        f"tables equal: {'yes' if tables_equal else 'NO'}"
    )
    return 0 if reproduced and checks_ok and tables_equal and no_commits else 1


if __name__ == "__main__":
    sys.exit(main())
