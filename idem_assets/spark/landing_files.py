"""Driver-side planning of a Spark landing read: which files, grouped by how Spark reads them.

Only metadata crosses the driver: directory listings, file sizes, Parquet footers' schemas
and CSV header lines (the first line of a gzip file is inflated for it). Rows are read by
the executors (``idem_assets.spark.landing``), which inflate ``.gz`` files by their suffix.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.errors import LandingFileError, LandingRootError
from idem_assets.landing.files import Discovery, Landing, discover_day, file_format, is_gzip
from idem_assets.landing.normalise import file_problem
from idem_assets.landing.raw import unique_names
from idem_assets.landing.store import LandingRoot, landing_root

_HEADER_BYTES = 1 << 16
ZERO_BYTES_NOTE = "zero-byte file: read as 0 rows"


@dataclass(frozen=True)
class FileGroup:
    """Files Spark can read in one go: same format and, for Parquet/CSV, the same columns."""

    format: str
    paths: tuple[Path, ...]
    # Column names as the files spell them (CSV/Parquet, made unique); empty for JSON Lines.
    columns: tuple[str, ...] = ()
    # Whole-file problem (missing or doubled contract columns): every row is quarantined.
    problem: str | None = None
    # Parquet: the Arrow type of each column, from the footer (how the local reader sees it).
    types: tuple[pa.DataType, ...] = ()


@dataclass
class LandingPlan:
    """Every file of a day range, grouped, plus what was skipped and why."""

    groups: list[FileGroup] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    dropped_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ignored_files: dict[str, str] = field(default_factory=dict)
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def parquet_schema(path: Path, relpath: str) -> pa.Schema:
    """A Parquet file's schema from its footer; an unreadable footer names the file."""
    try:
        return pq.read_schema(path).remove_metadata()
    except (pa.ArrowException, OSError) as exc:
        raise LandingFileError(
            relpath, f"not a readable Parquet file, truncated or corrupt ({exc}), re-deliver it"
        ) from exc


def _first_bytes(path: Path, relpath: str, size: int) -> bytes:
    """The first ``size`` bytes of a file's content (inflated for gzip files)."""
    if not is_gzip(path):
        with path.open("rb") as handle:
            return handle.read(size)
    try:
        with gzip.open(path, "rb") as handle:
            return handle.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise LandingFileError(relpath, f"not a readable gzip file ({exc}); re-deliver it") from exc


def csv_header(path: Path, relpath: str, delimiter: str = ",") -> list[str]:
    """The header fields of a CSV file, read from its first line only."""
    line = _first_bytes(path, relpath, _HEADER_BYTES).split(b"\n", 1)[0]
    try:
        text = line.decode("utf-8-sig").rstrip("\r")
    except UnicodeDecodeError as exc:
        raise LandingFileError(relpath, "CSV header is not valid UTF-8") from exc
    if not text.strip() or text.count('"') % 2:
        raise LandingFileError(
            relpath,
            "CSV header line is blank or has an open quote: the Spark reader needs a "
            "clean header row (the local reader can pinpoint the problem)",
        )
    return next(csv.reader([text], delimiter=delimiter))


def _is_empty(path: Path, relpath: str) -> bool:
    """Whether a file holds no content (a gzip file: no inflated bytes)."""
    if path.stat().st_size == 0:
        return True
    return is_gzip(path) and not _first_bytes(path, relpath, 1)


def local_root(landing: Landing) -> LandingRoot:
    """The landing root, which Spark's own file readers need on a path every executor sees."""
    root = landing_root(landing)
    if root.local_path("") is None:
        raise LandingRootError(
            root.uri,
            "the Spark engine reads landing files through Spark's file readers, which need a "
            "local or mounted folder here; read an object-storage landing zone with the local "
            "engine (engine: local), or mount the bucket on every executor",
        )
    return root


def plan_days(
    landing: Landing,
    contract: SourceContract,
    start: dt.date,
    end: dt.date,
    found: Mapping[dt.date, Discovery] | None = None,
) -> LandingPlan:
    """Group the files of days ``[start, end)`` by format and column layout."""
    root = local_root(landing)
    plan = LandingPlan()
    grouped: dict[tuple[str, str], list[Path]] = {}
    layouts: dict[tuple[str, str], tuple[tuple[str, ...], tuple[pa.DataType, ...]]] = {}
    wanted = {contract.file_name(c) for c in contract.columns}
    for offset in range((end - start).days):
        day = start + dt.timedelta(days=offset)
        listed = found.get(day) if found is not None else None
        discovery = listed if listed is not None else discover_day(root, contract, day)
        plan.ignored_files.update(discovery.ignored)
        for item in discovery.files:
            relpath = item.relpath
            path = root.local_path(relpath)
            assert path is not None
            plan.files.append(relpath)
            if _is_empty(path, relpath):
                plan.notes[relpath] = (ZERO_BYTES_NOTE,)
                continue
            fmt = file_format(path)
            assert fmt is not None
            columns: tuple[str, ...] = ()
            types: tuple[pa.DataType, ...] = ()
            if fmt == "parquet":
                schema = parquet_schema(path, relpath)
                columns, types = tuple(schema.names), tuple(schema.types)
                if len(set(columns)) < len(columns):
                    raise LandingFileError(
                        relpath,
                        "Parquet file repeats a column name; the "
                        "Spark reader cannot read it (the local reader can)",
                    )
                layout = schema.to_string(show_field_metadata=False)
            elif fmt == "csv":
                columns = tuple(csv_header(path, relpath, contract.csv_delimiter))
                layout = "\x00".join(columns)
            else:
                layout = ""
            extra = tuple(dict.fromkeys(c for c in columns if c not in wanted))
            if extra:
                plan.dropped_columns[relpath] = extra
            grouped.setdefault((fmt, layout), []).append(path)
            layouts[(fmt, layout)] = (columns, types)
    for (fmt, layout), paths in grouped.items():
        columns, types = layouts[(fmt, layout)]
        problem = file_problem(list(columns), contract) if fmt != "jsonl" else None
        names = tuple(unique_names(columns))
        plan.groups.append(FileGroup(fmt, tuple(paths), names, problem, types))
    return plan
