"""Finding landing files and fingerprinting them, wherever the landing root is.

The rules here (which files of a folder are read, the newest-snapshot rule, signatures)
work on listings (``idem_assets.landing.store``), so a folder on disk and a prefix in a
bucket holding the same files give the same discoveries and the same signatures.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from idem_assets.landing.contract import FORMATS, SourceContract
from idem_assets.landing.store import (
    SETTLE_SECONDS,
    Folder,
    LandingObject,
    LandingRoot,
    landing_root,
)

_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl"}
# Compressed forms of the text formats (Parquet compresses inside the file).
GZIP_SUFFIX = ".gz"
_GZIP_FORMATS = ("csv", "jsonl")

# Where a landing function's files are: a root, or a local path / URI read with the
# store's own environment (``landing_root``).
Landing = LandingRoot | str | Path


@dataclass(frozen=True)
class LandingFile:
    """One landing file that was read: where it is, what it held, and its content hash."""

    relpath: str  # posix, relative to the landing root
    format: str  # "parquet" | "csv" | "jsonl" (gzip-compressed files: their inner format)
    size: int
    sha256: str
    rows: int  # raw data rows seen (valid + quarantined)
    day: dt.date | None = None  # the day folder it was read from; None for snapshots


@dataclass(frozen=True)
class Discovery:
    """The files of one folder that will be read, and those left alone with the reason why."""

    files: tuple[LandingObject, ...]
    ignored: dict[str, str] = field(default_factory=dict)


def _name(path: str | PurePath) -> str:
    return PurePosixPath(str(path)).name


def file_format(path: str | PurePath, csv_suffixes: Iterable[str] = ()) -> str | None:
    """The landing format of a file from its name's suffix (case-insensitive), or None.

    ``.csv.gz`` and ``.jsonl.gz`` are gzip-compressed CSV and JSON Lines; ``csv_suffixes``
    (a source's ``csv.suffixes``, such as ``.tbl``) are more names for CSV, gzipped too.
    """
    suffixes = {**_SUFFIXES, **{s.lower(): "csv" for s in csv_suffixes}}
    name = _name(path).lower()
    if name.endswith(GZIP_SUFFIX):
        inner = suffixes.get(PurePosixPath(name[: -len(GZIP_SUFFIX)]).suffix)
        return inner if inner in _GZIP_FORMATS else None
    return suffixes.get(PurePosixPath(name).suffix)


def is_gzip(path: str | PurePath) -> bool:
    """Whether a landing file is gzip-compressed (by its suffix)."""
    return _name(path).lower().endswith(GZIP_SUFFIX)


def suffixes_of(formats: Iterable[str], csv_suffixes: Iterable[str] = ()) -> tuple[str, ...]:
    """The file suffixes read for the given formats, for messages."""
    out = []
    for fmt in formats:
        for suffix in (f".{fmt}", *(csv_suffixes if fmt == "csv" else ())):
            out.append(suffix)
            if fmt in _GZIP_FORMATS:
                out.append(f"{suffix}{GZIP_SUFFIX}")
    return tuple(out)


def is_hidden(name: str) -> bool:
    """Whether a file name marks an in-progress write or a marker (never data)."""
    # Writers stage files as .name.tmp / _temporary and drop markers like _SUCCESS:
    # none of them is data, and a half-written file must never be read.
    return name.startswith((".", "_"))


def _suffix(name: str) -> str:
    suffixes = PurePosixPath(name).suffixes
    if len(suffixes) > 1 and suffixes[-1].lower() == GZIP_SUFFIX:
        return "".join(suffixes[-2:])
    return PurePosixPath(name).suffix


def classify(
    folder: Folder | None, formats: Sequence[str], csv_suffixes: Sequence[str] = ()
) -> Discovery:
    """Which entries of a folder are read (by name), and why each other one is not."""
    if folder is None:
        return Discovery(())
    files: list[LandingObject] = []
    ignored: dict[str, str] = {}
    base = folder.relpath
    for name in folder.folders:
        ignored[f"{base}/{name}"] = "sub-folder: only files directly in the folder are read"
    for name in folder.others:
        ignored[f"{base}/{name}"] = "not a regular file"
    for item in folder.files:
        if is_hidden(item.name):
            ignored[item.relpath] = (
                "hidden file (name starts with '.' or '_'): in-progress or marker file"
            )
        elif file_format(item.name, csv_suffixes) not in formats:
            expected = ", ".join(suffixes_of(formats, csv_suffixes))
            ignored[item.relpath] = (
                f"unsupported suffix {_suffix(item.name)!r}: expected one of {expected}"
            )
        else:
            files.append(item)
    return Discovery(tuple(sorted(files, key=lambda f: f.name)), dict(sorted(ignored.items())))


def formats_of(contract: SourceContract) -> tuple[str, ...]:
    """The formats a source reads, in the reader's order."""
    return tuple(f for f in FORMATS if f in contract.formats)


def discover_day(landing: Landing, contract: SourceContract, day: dt.date) -> Discovery:
    """The files of ``day``'s folder in name order (a missing folder is an empty day)."""
    root = landing_root(landing)
    folder = root.folder(contract.day_folder(day))
    return classify(folder, formats_of(contract), contract.csv_suffixes)


# From this many days on, the source's day folders are listed in one pass of its tree
# rather than one listing per day: a bucket answers a thousand names per request, so a
# year of days costs a request or two instead of 365.
TREE_LISTING_DAYS = 32


def discover_days(
    landing: Landing, contract: SourceContract, days: Iterable[dt.date]
) -> dict[dt.date, Discovery]:
    """``discover_day`` for each day: a listing per day folder, or for many days one
    listing of the source's tree (the same folders, the same discoveries)."""
    root = landing_root(landing)
    days = list(days)
    if len(days) < TREE_LISTING_DAYS:
        return {day: discover_day(root, contract, day) for day in days}
    folders = contract.layout.days(root)
    formats = formats_of(contract)
    found = {}
    for day in days:
        folder = folders.get(day)
        if folder is not None and folder.relpath != contract.day_folder(day):
            folder = root.folder(contract.day_folder(day))  # another spelling of the day
        found[day] = classify(folder, formats, contract.csv_suffixes)
    return found


def discover_snapshot(landing: Landing, contract: SourceContract) -> Discovery:
    """The newest snapshot file (greatest file name) of a snapshot source, if any.

    Older snapshots are not reported as ignored: being superseded is their normal state.
    """
    root = landing_root(landing)
    folder = root.folder(contract.snapshot_folder())
    found = classify(folder, formats_of(contract), contract.csv_suffixes)
    newest = max(found.files, key=lambda f: f.name, default=None)
    return Discovery((newest,) if newest else (), found.ignored)


def day_folders(landing: Landing, contract: SourceContract) -> dict[dt.date, Folder]:
    """Every folder of the source's layout that names a valid day, with its entries."""
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source, it has no day folders")
    return contract.layout.days(landing_root(landing))


def list_days(landing: Landing, contract: SourceContract) -> list[dt.date]:
    """The days whose folder holds at least one readable file, ascending."""
    formats = formats_of(contract)
    return sorted(
        day
        for day, folder in day_folders(landing, contract).items()
        if classify(folder, formats, contract.csv_suffixes).files
    )


class HashCache:
    """Content hashes of landing files, reused while a file's stamp is unchanged.

    ``known`` holds the hashes an earlier run kept (see ``kept``). A file whose listed
    stamp matches is not read again, so proving a day unchanged costs a listing instead of
    reading every byte (on object storage: no download at all). A local file's hash is
    kept only once it has settled (see ``LandingRoot.settled``).
    """

    def __init__(
        self,
        known: Mapping[str, Sequence[Any]] | None = None,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self.settle_seconds = settle_seconds
        self._known: dict[str, tuple[tuple[Any, ...], str]] = {}
        for relpath, entry in (known or {}).items():
            try:
                *stamp, sha = entry
                self._known[relpath] = (tuple(stamp), str(sha))
            except (TypeError, ValueError):
                continue  # written by another version: hash the file again
        self._kept: dict[str, tuple[tuple[Any, ...], str]] = {}
        self._fresh: set[str] = set()
        self._seen: dict[str, str] = {}
        self.reused = 0
        self.hashed = 0

    def sha256(self, root: LandingRoot, item: LandingObject) -> str:
        """The file's content hash, from the known hashes when its stamp is unchanged."""
        hit = self._known.get(item.relpath)
        if hit is not None and hit[0] == item.stamp:
            self._kept[item.relpath] = hit
            self._seen[item.relpath] = hit[1]
            self.reused += 1
            return hit[1]
        sha = root.sha256(item)
        self._seen[item.relpath] = sha
        self.hashed += 1
        if root.settled(item, self.settle_seconds):
            self._kept[item.relpath] = (item.stamp, sha)
            self._fresh.add(item.relpath)
        return sha

    def known_sha256(self, relpath: str) -> str | None:
        """The hash this cache found or computed for ``relpath`` in this run, if any."""
        return self._seen.get(relpath)

    def kept(self) -> dict[str, list[Any]]:
        """The hashes worth keeping for the next run (JSON-friendly)."""
        return {rel: [*stamp, sha] for rel, (stamp, sha) in sorted(self._kept.items())}

    def fresh(self) -> dict[str, tuple[tuple[Any, ...], str]]:
        """The hashes computed here that are worth keeping: ``relpath -> (stamp, sha256)``."""
        return {rel: self._kept[rel] for rel in sorted(self._fresh)}


def files_signature(entries: Iterable[tuple[str, str]]) -> str | None:
    """sha256 over sorted ``relpath<TAB>sha256<LF>`` lines; None when there are no files."""
    lines = sorted(f"{rel}\t{sha}\n" for rel, sha in entries)
    if not lines:
        return None
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def signature_of(landing: Landing, found: Discovery, cache: HashCache | None = None) -> str | None:
    """Fingerprint of a discovery's files (their bytes, hashed or vouched for by the cache)."""
    root = landing_root(landing)
    entries = [
        (item.relpath, root.sha256(item) if cache is None else cache.sha256(root, item))
        for item in found.files
    ]
    return files_signature(entries)


def listing_hint(root: LandingRoot, found: Discovery) -> str | None:
    """A digest of what the listing says about a discovery's files, reading no byte."""
    if not found.files:
        return None
    described = json.dumps(sorted([f.relpath, *root.hint(f)] for f in found.files))
    return hashlib.sha256(described.encode()).hexdigest()


def day_signature(
    landing: Landing,
    contract: SourceContract,
    day: dt.date,
    cache: HashCache | None = None,
) -> str | None:
    """Fingerprint of everything the reader would read for ``day``; None if it has no files."""
    root = landing_root(landing)
    return signature_of(root, discover_day(root, contract, day), cache)


def snapshot_signature(
    landing: Landing, contract: SourceContract, cache: HashCache | None = None
) -> str | None:
    """Fingerprint of the newest snapshot file; None if there is none."""
    root = landing_root(landing)
    return signature_of(root, discover_snapshot(root, contract), cache)
