"""Finding landing files, fingerprinting them, and the error raised for unreadable ones."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idem_assets.landing.contract import FORMATS, SourceContract

_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl"}
# Compressed forms of the text formats (Parquet compresses inside the file).
GZIP_SUFFIX = ".gz"
_GZIP_FORMATS = ("csv", "jsonl")
_HASH_CHUNK = 1 << 20
# A file changed this recently may change again within the same clock tick without its
# stamp moving, so its hash is not kept for reuse (git's "racy timestamp" rule).
SETTLE_SECONDS = 2.0


class LandingFileError(ValueError):
    """A landing file cannot be read at all; the message names the file and the problem."""

    def __init__(self, relpath: str, problem: str) -> None:
        super().__init__(f"{relpath}: {problem}")
        self.relpath = relpath
        self.problem = problem


@dataclass(frozen=True)
class LandingFile:
    """One landing file that was read: where it is, what it held, and its content hash."""

    path: Path
    relpath: str  # posix, relative to the landing dir
    format: str  # "parquet" | "csv" | "jsonl" (gzip-compressed files: their inner format)
    size: int
    sha256: str
    rows: int  # raw data rows seen (valid + quarantined)
    day: dt.date | None = None  # the day folder it was read from; None for snapshots


@dataclass(frozen=True)
class Discovery:
    """The files of one folder that will be read, and those left alone with the reason why."""

    files: tuple[Path, ...]
    ignored: dict[str, str]


def file_format(path: Path) -> str | None:
    """The landing format of ``path`` from its suffix (case-insensitive), or None.

    ``.csv.gz`` and ``.jsonl.gz`` are gzip-compressed CSV and JSON Lines.
    """
    name = path.name.lower()
    if name.endswith(GZIP_SUFFIX):
        inner = _SUFFIXES.get(Path(name[: -len(GZIP_SUFFIX)]).suffix)
        return inner if inner in _GZIP_FORMATS else None
    return _SUFFIXES.get(Path(name).suffix)


def is_gzip(path: Path) -> bool:
    """Whether a landing file is gzip-compressed (by its suffix)."""
    return path.name.lower().endswith(GZIP_SUFFIX)


def suffixes_of(formats: Iterable[str]) -> tuple[str, ...]:
    """The file suffixes read for the given formats, for messages."""
    out = []
    for fmt in formats:
        out.append(f".{fmt}")
        if fmt in _GZIP_FORMATS:
            out.append(f".{fmt}{GZIP_SUFFIX}")
    return tuple(out)


def relpath_of(landing_dir: str | Path, path: Path) -> str:
    """``path`` relative to the landing dir, with forward slashes."""
    return path.relative_to(Path(landing_dir)).as_posix()


def is_hidden(name: str) -> bool:
    """Whether a file name marks an in-progress write or a marker (never data)."""
    # Writers stage files as .name.tmp / _temporary and drop markers like _SUCCESS:
    # none of them is data, and a half-written file must never be read.
    return name.startswith((".", "_"))


def _discover(landing_dir: str | Path, folder: Path, formats: tuple[str, ...]) -> Discovery:
    if not folder.is_dir():
        return Discovery((), {})
    files: list[Path] = []
    ignored: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        rel = relpath_of(landing_dir, entry)
        if entry.is_dir():
            ignored[rel] = "sub-folder: only files directly in the folder are read"
        elif is_hidden(entry.name):
            ignored[rel] = "hidden file (name starts with '.' or '_'): in-progress or marker file"
        elif not entry.is_file():
            ignored[rel] = "not a regular file"
        elif file_format(entry) not in formats:
            expected = ", ".join(suffixes_of(formats))
            ignored[rel] = f"unsupported suffix {_suffix(entry)!r}: expected one of {expected}"
        else:
            files.append(entry)
    return Discovery(tuple(files), ignored)


def _suffix(path: Path) -> str:
    suffixes = path.suffixes
    if len(suffixes) > 1 and suffixes[-1].lower() == GZIP_SUFFIX:
        return "".join(suffixes[-2:])
    return path.suffix


def discover_day(landing_dir: str | Path, contract: SourceContract, day: dt.date) -> Discovery:
    """The files of ``day``'s folder in relpath order (a missing folder is an empty day)."""
    return _discover(landing_dir, contract.day_dir(landing_dir, day), _formats(contract))


def discover_snapshot(landing_dir: str | Path, contract: SourceContract) -> Discovery:
    """The newest snapshot file (greatest file name) of a snapshot source, if any.

    Older snapshots are not reported as ignored: being superseded is their normal state.
    """
    found = _discover(landing_dir, contract.snapshot_dir(landing_dir), _formats(contract))
    newest = max(found.files, key=lambda p: p.name, default=None)
    return Discovery((newest,) if newest else (), found.ignored)


def _formats(contract: SourceContract) -> tuple[str, ...]:
    return tuple(f for f in FORMATS if f in contract.formats)


def day_folders(landing_dir: str | Path, contract: SourceContract) -> dict[dt.date, Path]:
    """Every folder of the source's layout that names a valid day, with its day."""
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source, it has no day folders")
    return contract.layout.days(landing_dir)


def list_days(landing_dir: str | Path, contract: SourceContract) -> list[dt.date]:
    """The days whose folder holds at least one readable file, ascending."""
    return sorted(
        day
        for day in day_folders(landing_dir, contract)
        if discover_day(landing_dir, contract, day).files
    )


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileStamp:
    """What the file system says about a file's bytes without reading them.

    Writing a file moves its ctime, which no user call can set back, so an equal stamp
    (size, mtime, ctime, inode, device) means the bytes were not rewritten.
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    device: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        """The current stamp of ``path``."""
        st = os.stat(path)
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)

    def settled(self, seconds: float = SETTLE_SECONDS) -> bool:
        """Whether the file has been still for ``seconds``, so its stamp can be trusted."""
        return time.time_ns() - max(self.mtime_ns, self.ctime_ns) > seconds * 1e9


class HashCache:
    """Content hashes of landing files, reused while a file's stamp is unchanged.

    ``known`` holds the hashes an earlier run kept (see ``kept``). A file whose stamp
    matches is not read again, so proving a day unchanged costs a ``stat`` per file
    instead of hashing every byte. A hash is kept only when the file had settled and its
    stamp was the same before and after reading it.
    """

    def __init__(
        self,
        known: Mapping[str, Sequence[Any]] | None = None,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self.settle_seconds = settle_seconds
        self._known: dict[str, tuple[FileStamp, str]] = {}
        for relpath, entry in (known or {}).items():
            try:
                *stamp, sha = entry
                self._known[relpath] = (FileStamp(*(int(v) for v in stamp)), str(sha))
            except (TypeError, ValueError):
                continue  # written by another version: hash the file again
        self._kept: dict[str, tuple[FileStamp, str]] = {}
        self.reused = 0
        self.hashed = 0

    def sha256(self, relpath: str, path: Path) -> str:
        """The file's content hash, from the known hashes when its stamp is unchanged."""
        before = FileStamp.of(path)
        hit = self._known.get(relpath)
        if hit is not None and hit[0] == before:
            self._kept[relpath] = hit
            self.reused += 1
            return hit[1]
        sha = sha256_file(path)
        self.hashed += 1
        if before.settled(self.settle_seconds) and FileStamp.of(path) == before:
            self._kept[relpath] = (before, sha)
        return sha

    def kept(self) -> dict[str, list[Any]]:
        """The hashes worth keeping for the next run (JSON-friendly)."""
        return {
            rel: [stamp.size, stamp.mtime_ns, stamp.ctime_ns, stamp.inode, stamp.device, sha]
            for rel, (stamp, sha) in sorted(self._kept.items())
        }


def files_signature(entries: Iterable[tuple[str, str]]) -> str | None:
    """sha256 over sorted ``relpath<TAB>sha256<LF>`` lines; None when there are no files."""
    lines = sorted(f"{rel}\t{sha}\n" for rel, sha in entries)
    if not lines:
        return None
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _signature(
    landing_dir: str | Path, files: Iterable[Path], cache: HashCache | None
) -> str | None:
    entries = []
    for path in files:
        relpath = relpath_of(landing_dir, path)
        sha = sha256_file(path) if cache is None else cache.sha256(relpath, path)
        entries.append((relpath, sha))
    return files_signature(entries)


def day_signature(
    landing_dir: str | Path,
    contract: SourceContract,
    day: dt.date,
    cache: HashCache | None = None,
) -> str | None:
    """Fingerprint of everything the reader would read for ``day``; None if it has no files."""
    return _signature(landing_dir, discover_day(landing_dir, contract, day).files, cache)


def snapshot_signature(
    landing_dir: str | Path, contract: SourceContract, cache: HashCache | None = None
) -> str | None:
    """Fingerprint of the newest snapshot file; None if there is none."""
    return _signature(landing_dir, discover_snapshot(landing_dir, contract).files, cache)
