"""Command line: check declarations, and read landing files with one to see what loads.

python -m idem_assets.sources check idem_assets/defs          # every defs.yaml below
python -m idem_assets.sources inspect path/to/defs.yaml --landing DIR --start 2024-03-01
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from idem_assets._cli_args import day, quiet_on_closed_pipe
from idem_assets.landing.errors import LandingFileError, LandingRootError
from idem_assets.landing.reader import LandingBatch, read_days, read_snapshot
from idem_assets.landing.store import landing_root
from idem_assets.sources.declaration import LandingSource
from idem_assets.sources.load import DeclarationError, load_source


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m idem_assets.sources",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="load declarations; name every problem")
    check.add_argument(
        "paths", nargs="+", type=Path, help="defs.yaml files, or folders searched for defs.yaml"
    )
    inspect = commands.add_parser("inspect", help="read landing files with a declaration")
    inspect.add_argument("declaration", type=Path, help="the source's defs.yaml")
    inspect.add_argument(
        "--landing",
        required=True,
        help="landing root: a folder or s3://bucket/prefix (credentials from AWS_* variables)",
    )
    inspect.add_argument("--start", type=day, help="first day (daily sources)")
    inspect.add_argument("--days", type=int, default=1, help="number of days (default 1)")
    return parser


def declaration_files(paths: Sequence[Path]) -> list[Path]:
    """The declaration files named, or found (``**/defs.yaml``) in the folders named."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.rglob("defs.yaml")) if path.is_dir() else [path])
    return found


def summary(source: LandingSource, batch: LandingBatch) -> dict[str, object]:
    """What reading gave: rows, quarantine reasons, and the rows breaking each value rule."""
    reasons = Counter(r.split(":", 1)[0] for r in batch.quarantine.column("reason").to_pylist())
    frame = pl.from_arrow(batch.rows)
    assert isinstance(frame, pl.DataFrame)
    rules = {
        rule.name: int(frame.select(rule.violated().sum()).item() or 0)
        for rule in source.contract().check_rules
    }
    return {
        "source": batch.source,
        "files": [f.relpath for f in batch.files],
        "raw_rows": batch.raw_rows,
        "valid_rows": batch.rows.num_rows,
        "quarantined_rows": batch.quarantine.num_rows,
        "quarantine_by_first_column": dict(sorted(reasons.items())),
        "quarantine_samples": batch.quarantine.select(["source_file", "row_number", "reason"])
        .slice(0, 5)
        .to_pylist(),
        "rows_breaking_rules": rules,
        "dropped_columns": {k: list(v) for k, v in batch.dropped_columns.items()},
        "ignored_files": dict(batch.ignored_files),
        # What the declaration's spellings did: nulls per column by spelling, each file's
        # folder day (the value of folder_day columns), the encoding the text was read in.
        "nulls_by_spelling": {c: dict(n) for c, n in batch.null_spellings.items()},
        "folder_days": {f.relpath: f.day for f in batch.files if f.day is not None},
        "folder_day_columns": list(source.contract().folder_day_columns),
        "encoding": source.encoding,
        "signature": batch.signature,
    }


@quiet_on_closed_pipe
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code (1: a bad declaration)."""
    args = _parser().parse_args(argv)
    if args.command == "check":
        failed = 0
        for path in declaration_files(args.paths):
            try:
                source = load_source(path)
            except DeclarationError as exc:
                failed += 1
                print(exc, file=sys.stderr)
                continue
            print(
                f"{path}: ok ({source.name}: {len(source.columns)} columns, "
                f"{source.resolved_strategy})"
            )
        return 1 if failed else 0
    try:
        source = load_source(args.declaration)
        contract = source.contract()
        root = landing_root(args.landing, where="--landing")
        if contract.daily:
            if args.start is None:
                raise ValueError(f"--start is required for the daily source {contract.name}")
            end = args.start + dt.timedelta(days=args.days)
            batch = read_days(root, contract, args.start, end)
        else:
            batch = read_snapshot(root, contract)
        print(json.dumps(summary(source, batch), indent=2, default=str))
    except (DeclarationError, LandingFileError, LandingRootError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
