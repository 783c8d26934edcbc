"""Stream command line: land demo files, show the offset log.

python -m idem_assets.stream append --landing DIR --files 5 --events 100 --seed 7 [--defects]
python -m idem_assets.stream status --url sqlite:///data/state/checkpoint.db
"""

from __future__ import annotations

import argparse
import sys

from idem_assets.checkpoint import open_store
from idem_assets.sample.sources import EVENTS_STREAM
from idem_assets.sample.stream_files import append_stream_files
from idem_assets.stream.offsets import OffsetLog


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m idem_assets.stream")
    commands = parser.add_subparsers(dest="command", required=True)
    append = commands.add_parser("append", help="land more deterministic events_stream files")
    append.add_argument("--landing", required=True)
    append.add_argument("--files", type=int, required=True)
    append.add_argument("--events", type=int, default=100)
    append.add_argument("--seed", type=int, default=7)
    append.add_argument(
        "--defects", action="store_true", help="every fourth file carries one row for quarantine"
    )
    status = commands.add_parser("status", help="list the batches of the offset log")
    status.add_argument("--url", required=True, help="checkpoint store URL")
    args = parser.parse_args(argv)
    if args.command == "append":
        written = append_stream_files(
            args.landing, args.files, args.events, args.seed, defects=args.defects
        )
        for item in written:
            print(f"{item.path}\t{len(item.rows)} rows\t{item.redelivered} re-delivered")
        return 0
    with open_store(args.url) as store:
        for batch in OffsetLog(store, EVENTS_STREAM).batches():
            tracker = batch.tracker
            problem = f"\t{tracker.last_error}" if tracker.last_error else ""
            print(
                f"{batch.seq}\t{tracker.status}\t{len(batch.plan.files)} files\t"
                f"attempts {tracker.attempts}/{tracker.max_attempts}{problem}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
