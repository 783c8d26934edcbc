"""Driver-side planning of a Spark landing read: which files, grouped by how Spark reads them.

Only metadata crosses the driver: directory listings, file sizes, Parquet footers' schemas
and CSV header lines. Rows are read by the executors (``idem_assets.spark.landing``).
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.files import LandingFileError, discover_day, file_format, relpath_of
from idem_assets.landing.raw import unique_names

_HEADER_BYTES = 1 << 16


@dataclass(frozen=True)
class FileGroup:
    """Files Spark can read in one go: same format and, for Parquet/CSV, the same columns."""

    format: str
    paths: tuple[Path, ...]
    # Column names as the files spell them (CSV/Parquet); empty for JSON Lines.
    columns: tuple[str, ...] = ()
    # Whole-file problem (missing or doubled contract columns): every row is quarantined.
    problem: str | None = None


@dataclass
class LandingPlan:
    """Every file of a day range, grouped, plus what was skipped and why."""

    groups: list[FileGroup] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    dropped_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ignored_files: dict[str, str] = field(default_factory=dict)
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def file_problem(names: list[str], contract: SourceContract) -> str | None:
    """The reader's whole-file problem for these columns: missing or doubled contract columns."""
    missing = [c for c in contract.columns if c not in names]
    doubled = sorted(c for c, n in Counter(names).items() if n > 1 and c in contract.columns)
    problems = []
    if missing:
        problems.append(
            f"file lacks contract column(s) {', '.join(missing)} (it has: {', '.join(names)})")
    if doubled:
        problems.append(f"contract column(s) {', '.join(doubled)} appear more than once")
    return " and ".join(problems) or None


def parquet_schema(path: Path, relpath: str) -> pa.Schema:
    """A Parquet file's schema from its footer; an unreadable footer names the file."""
    try:
        return pq.read_schema(path).remove_metadata()
    except (pa.ArrowException, OSError) as exc:
        raise LandingFileError(
            relpath, f"not a readable Parquet file, truncated or corrupt ({exc}), re-deliver it"
        ) from exc


def csv_header(path: Path, relpath: str) -> list[str]:
    """The header fields of a CSV file, read from its first line only."""
    with path.open("rb") as handle:
        line = handle.readline(_HEADER_BYTES)
    try:
        text = line.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise LandingFileError(relpath, "CSV header is not valid UTF-8") from exc
    if not text.strip() or text.count('"') % 2:
        raise LandingFileError(
            relpath, "CSV header line is blank or has an open quote: the Spark reader needs a "
            "clean header row (the local reader can pinpoint the problem)")
    return next(csv.reader([text]))


def plan_days(
    landing_dir: str | Path, contract: SourceContract, start: dt.date, end: dt.date
) -> LandingPlan:
    """Group the files of days ``[start, end)`` by format and column layout."""
    plan = LandingPlan()
    grouped: dict[tuple[str, str], list[Path]] = {}
    layouts: dict[tuple[str, str], tuple[str, ...]] = {}
    for offset in range((end - start).days):
        found = discover_day(landing_dir, contract, start + dt.timedelta(days=offset))
        plan.ignored_files.update(found.ignored)
        for path in found.files:
            relpath = relpath_of(landing_dir, path)
            if path.stat().st_size == 0:
                plan.notes[relpath] = ("zero-byte file: read as 0 rows",)
                continue
            fmt = file_format(path)
            assert fmt is not None
            plan.files.append(relpath)
            columns: tuple[str, ...] = ()
            if fmt == "parquet":
                schema = parquet_schema(path, relpath)
                columns = tuple(schema.names)
                if len(set(columns)) < len(columns):
                    raise LandingFileError(relpath, "Parquet file repeats a column name; the "
                                           "Spark reader cannot read it (the local reader can)")
                layout = schema.to_string(show_field_metadata=False)
            elif fmt == "csv":
                columns = tuple(csv_header(path, relpath))
                layout = "\x00".join(columns)
            else:
                layout = ""
            extra = tuple(dict.fromkeys(c for c in columns if c not in contract.columns))
            if extra:
                plan.dropped_columns[relpath] = extra
            grouped.setdefault((fmt, layout), []).append(path)
            layouts[(fmt, layout)] = columns
    for (fmt, layout), paths in grouped.items():
        columns = layouts[(fmt, layout)]
        problem = file_problem(list(columns), contract) if fmt != "jsonl" else None
        names = tuple(unique_names(columns))
        plan.groups.append(FileGroup(fmt, tuple(paths), names, problem))
    return plan
