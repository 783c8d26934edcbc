"""Command line: generate the sample domain's landing data, add a late orders file, lay
out TPC-H data (made by tpchgen-cli) as the tpch domain's landing files, land more
events_stream files and list its offset log, or print the sample days laid out.

To read files with a declaration, use ``python -m idem_assets.sources inspect``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence

from idem_assets._cli_args import day, quiet_on_closed_pipe
from idem_assets.landing.errors import LandingFileError
from idem_assets.sample.generator import generate, write_late_orders
from idem_assets.sample.tpch import DEFAULT_DAYS, DEFAULT_SCALE, TpchgenError, lay_out_tpch


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m idem_assets.sample", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="write deterministic sample landing files")
    gen.add_argument("--out", required=True, help="landing directory to write into")
    gen.add_argument("--start", required=True, type=day, help="first day, YYYY-MM-DD")
    gen.add_argument("--days", type=int, default=14, help="number of days (default 14)")
    gen.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    gen.add_argument("--scale", type=float, default=1.0, help="row count multiplier")
    gen.add_argument("--clean", action="store_true", help="plant no quarantine-worthy rows")
    late = commands.add_parser("late-orders", help="add a late orders file to an old day")
    late.add_argument("--landing", required=True, help="landing directory")
    late.add_argument("--day", required=True, type=day, help="the day folder to add to")
    late.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    late.add_argument("--n", type=int, default=10, help="orders to update (default 10)")
    tpch = commands.add_parser("tpch", help="lay out TPC-H data from tpchgen-cli as landing files")
    tpch.add_argument("--out", required=True, help="landing directory (files go under tpch/)")
    tpch.add_argument(
        "--scale",
        type=float,
        default=DEFAULT_SCALE,
        help=f"TPC-H scale factor (default {DEFAULT_SCALE})",
    )
    tpch.add_argument(
        "--days",
        type=int,
        default=DEFAULT_DAYS,
        help=f"days from 1992-01-01 to lay out (default {DEFAULT_DAYS})",
    )
    stream = commands.add_parser(
        "stream-files", help="land more deterministic files of the events_stream source"
    )
    stream.add_argument("--landing", required=True, help="landing directory")
    stream.add_argument("--files", type=int, required=True, help="files to add")
    stream.add_argument("--events", type=int, default=100, help="events per file (default 100)")
    stream.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    stream.add_argument(
        "--defects", action="store_true", help="every fourth file carries one row for quarantine"
    )
    status = commands.add_parser(
        "stream-status", help="list the batches of the events_stream's offset log"
    )
    status.add_argument("--url", required=True, help="checkpoint store URL")
    days = commands.add_parser(
        "days",
        help="the sample days laid out: FIRST...LAST (a partition range), or one end of it",
    )
    days.add_argument(
        "--landing",
        default=None,
        help="landing directory (default: IDEM_LANDING_DIR, else data/landing)",
    )
    end = days.add_mutually_exclusive_group()
    end.add_argument("--first", action="store_true", help="print the first day only")
    end.add_argument("--last", action="store_true", help="print the last day only")
    return parser


def laid_out_days(landing: str | None) -> list[dt.date]:
    """The days whose sample orders folder holds a file, ascending."""
    from idem_assets.landing import list_days
    from idem_assets.resources import LakeResource
    from idem_assets.sample.sources import ORDERS

    lake = LakeResource(landing_dir=landing) if landing else LakeResource()
    return list_days(lake.landing(), ORDERS)


def _stream_files(args: argparse.Namespace) -> int:
    from idem_assets.sample.stream_files import append_stream_files

    written = append_stream_files(
        args.landing, args.files, args.events, args.seed, defects=args.defects
    )
    for item in written:
        print(f"{item.path}\t{len(item.rows)} rows\t{item.redelivered} re-delivered")
    return 0


def _stream_status(url: str) -> int:
    from idem_assets.checkpoint import open_store
    from idem_assets.sample.sources import EVENTS_STREAM
    from idem_assets.stream.offsets import OffsetLog

    with open_store(url) as store:
        for batch in OffsetLog(store, EVENTS_STREAM).batches():
            tracker = batch.tracker
            problem = f"\t{tracker.last_error}" if tracker.last_error else ""
            print(
                f"{batch.seq}\t{tracker.status}\t{len(batch.plan.files)} files\t"
                f"attempts {tracker.attempts}/{tracker.max_attempts}{problem}"
            )
    return 0


def _days(args: argparse.Namespace) -> int:
    found = laid_out_days(args.landing)
    if not found:
        print("error: no sample days laid out; run `make sample-data`", file=sys.stderr)
        return 1
    first, last = found[0].isoformat(), found[-1].isoformat()
    print(first if args.first else last if args.last else f"{first}...{last}")
    return 0


@quiet_on_closed_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "days":
            return _days(args)
        if args.command == "stream-files":
            return _stream_files(args)
        if args.command == "stream-status":
            return _stream_status(args.url)
        if args.command == "generate":
            summary = generate(
                args.out, args.start, args.days, args.seed, clean=args.clean, scale=args.scale
            )
            print(json.dumps(summary.as_dict(), indent=2))
        elif args.command == "tpch":
            print(json.dumps(lay_out_tpch(args.out, args.scale, args.days).as_dict(), indent=2))
        else:
            print(write_late_orders(args.landing, args.day, args.seed, args.n))
    except (LandingFileError, TpchgenError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
