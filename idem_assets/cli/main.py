"""``idem-assets check``: run asset checks against the existing lake, fail CI on ERROR.

(``idem-assets pools [--apply]`` sets each lake table's writer limit in the instance: see
``idem_assets.cli.pools``; ``idem-assets erase`` erases a key for good: see
``idem_assets.cli.erase``.)

Dagster has no command that runs asset checks and fails when one fails (``dagster asset
materialize`` and ``dg launch`` exit 0 when a non-blocking check fails). This one::

    idem-assets check --select 'key:orders or key:daily_sales' \\
        --partition-range 2024-03-01...2024-03-07 --junit-xml checks.xml

loads the code location as ``dagster``/``dg`` find it (``-m`` / ``-f``, else the nearest
``dg.toml`` or ``pyproject.toml``: ``[tool.dg.project] code_location_target_module``,
else ``<root_module>.definitions``, or ``[tool.dagster] module_name``; cli/location.py),
resolves the selection with Dagster's asset selection syntax, runs the selected assets'
checks without writing (``--materialize``: materializes them first, for CI jobs that
build a staging lake), prints one row per (asset, partition, check), optionally writes
JUnit XML, and exits 1 when an ERROR check failed or a check could not run. A failed WARN
check is listed and exits 0. Results are recorded in the Dagster instance of
``DAGSTER_HOME`` when it is set (the UI shows them), else in a temporary one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import dagster as dg

from idem_assets._cli_args import quiet_on_closed_pipe
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.cli.erase import (
    EraseError,
    bound_resources,
    erase,
    erase_report,
    erasure_status,
    parse_key,
    vacuum_now,
    vacuum_report,
)
from idem_assets.cli.event_log_erasure import erased_values_in_event_log, event_log_report
from idem_assets.cli.location import CheckCommandError, load_definitions
from idem_assets.cli.pools import apply_writers, declared_writers
from idem_assets.cli.report import junit_xml, table
from idem_assets.cli.run import run_checks
from idem_assets.io_manager.erasure import erasable_sources, erasable_tables

# Dagster's own variable for where its instance lives (see idem_assets.resources).
DAGSTER_HOME_ENV = "DAGSTER_HOME"


def _instance() -> dg.DagsterInstance:
    return (
        dg.DagsterInstance.get()
        if os.environ.get(DAGSTER_HOME_ENV)
        else dg.DagsterInstance.ephemeral()
    )


@quiet_on_closed_pipe
def main(argv: list[str] | None = None) -> int:
    """``idem-assets check ...``; exit 1 when an ERROR check failed, 2 on usage errors."""
    parser = argparse.ArgumentParser(prog="idem-assets", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="run asset checks; exit 1 if an ERROR one fails")
    check.add_argument(
        "--select", required=True, help="Dagster asset selection, e.g. 'key:orders or group:lake'"
    )
    when = check.add_mutually_exclusive_group()
    when.add_argument("--partition", help="one partition key")
    when.add_argument(
        "--partition-range",
        metavar="FIRST...LAST",
        help="an inclusive range of partition keys, checked day by day",
    )
    check.add_argument(
        "--materialize",
        action="store_true",
        help="materialize the selection first (a staging lake in CI)",
    )
    check.add_argument("--junit-xml", metavar="FILE", help="write the results as JUnit XML")
    pools = commands.add_parser(
        "pools",
        help="print (and with --apply set) each lake table's writer limit in the instance",
    )
    pools.add_argument(
        "--apply", action="store_true", help="set the limits in the instance of DAGSTER_HOME"
    )
    erase = commands.add_parser(
        "erase",
        help="erase a key from every lake table declaring it, and from every later write",
    )
    what = erase.add_mutually_exclusive_group()
    what.add_argument("--key", metavar="COLUMN=VALUE", help="the key to erase, e.g. customer_id=42")
    what.add_argument(
        "--status",
        action="store_true",
        help="list the erased keys (by digest) and every data file on storage still holding "
        "each (current, removed by a commit, change data), from a scan of every table "
        "declaring the key's column and the tables kept beside it",
    )
    erase.add_argument(
        "--vacuum-now",
        action="store_true",
        help="finish erasures now: override vacuum's retention for the tables still holding "
        "an erased key (time travel to their earlier versions and readers still on one lose "
        "their files; change-feed consumers cannot read the deleted change data)",
    )
    erase.add_argument(
        "--tables", help="comma-separated lake tables (default: every table declaring the column)"
    )
    for command in (check, pools, erase):
        command.add_argument("-m", "--module-name", help="the code location's module")
        command.add_argument("-f", "--python-file", help="the code location's Python file")
        command.add_argument("-a", "--attribute", help="the Definitions attribute in it")
    args = parser.parse_args(argv)
    if args.command == "pools":
        return _pools(args)
    if args.command == "erase":
        return _erase(args)
    try:
        definitions = load_definitions(
            args.module_name, args.python_file, args.attribute, Path.cwd()
        )
        report = run_checks(
            definitions,
            args.select,
            partition=args.partition,
            partition_range=args.partition_range,
            materialize=args.materialize,
            instance=_instance(),
        )
    except CheckCommandError as error:
        print(f"idem-assets check: {error}", file=sys.stderr)
        return 2
    print(table(report.outcomes))
    for error in report.errors:
        print(f"error: {error}")
    failed = [o for o in report.outcomes if o.fails_ci]
    warned = [o for o in report.outcomes if not o.passed and not o.fails_ci]
    print(
        f"\n{len(report.outcomes)} check results: {len(failed)} ERROR failed, "
        f"{len(warned)} WARN, {len(report.errors)} errors"
    )
    for line in report.empty_day_lines():
        print(line)
    if args.junit_xml:
        Path(args.junit_xml).write_text(junit_xml(report))
    return 1 if failed or report.errors else 0


def _pools(args: argparse.Namespace) -> int:
    """``idem-assets pools [--apply]``: 0, or 2 when the code location does not load or
    ``--apply`` has no instance to set."""
    try:
        definitions = load_definitions(
            args.module_name, args.python_file, args.attribute, Path.cwd()
        )
    except CheckCommandError as error:
        print(f"idem-assets pools: {error}", file=sys.stderr)
        return 2
    limits = declared_writers(definitions)
    if args.apply:
        if not os.environ.get(DAGSTER_HOME_ENV):
            print("idem-assets pools --apply: set DAGSTER_HOME to the instance", file=sys.stderr)
            return 2
        before = apply_writers(dg.DagsterInstance.get(), limits)
        for pool, limit in limits.items():
            print(f"{pool}\t{limit} writer(s)\t(was {before[pool] or 'the default'})")
    else:
        for pool, limit in limits.items():
            print(f"{pool}\t{limit} writer(s)")
    return 0


def _erase(args: argparse.Namespace) -> int:
    """``idem-assets erase --key COLUMN=VALUE [--tables ...]`` or ``--status``: 0, or 2 on a
    usage error (a malformed key, an unknown table, no table declaring the column)."""
    try:
        definitions = load_definitions(
            args.module_name, args.python_file, args.attribute, Path.cwd()
        )
        declared = erasable_tables(definitions)
        sources = erasable_sources(definitions)
        if not (args.key or args.status or args.vacuum_now):
            raise EraseError("give --key COLUMN=VALUE, --status or --vacuum-now")
        if args.status and args.vacuum_now:
            raise EraseError("--vacuum-now prints the status after it; give one of the two")
        with bound_resources(definitions) as (lake, checkpoint), checkpoint.open() as store:
            if args.key:
                column, value = parse_key(args.key)
                tables = [t.strip() for t in args.tables.split(",")] if args.tables else None
                print(
                    erase_report(
                        erase(lake, store, declared, column, value, tables, sources=sources)
                    )
                )
            if args.vacuum_now:
                print(vacuum_report(vacuum_now(lake, store, declared, sources)))
            elif args.status:
                print(erasure_status(ErasureLedger(store), lake, declared, sources))
                if ledger_events := _event_log_status(ErasureLedger(store)):
                    print(ledger_events)
    except (CheckCommandError, EraseError) as error:
        print(f"idem-assets erase: {error}", file=sys.stderr)
        return 2
    return 0


def _event_log_status(ledger: ErasureLedger) -> str:
    """What Dagster's event log of ``DAGSTER_HOME`` still shows of erased values."""
    if not ledger.entries():
        return ""
    if not os.environ.get(DAGSTER_HOME_ENV):
        return "Dagster's event log: not read (set DAGSTER_HOME to the instance to search it)"
    holdings = erased_values_in_event_log(dg.DagsterInstance.get(), ledger.erased())
    return f"Dagster's event log ({os.environ[DAGSTER_HOME_ENV]}):\n{event_log_report(holdings)}"


if __name__ == "__main__":
    sys.exit(main())
