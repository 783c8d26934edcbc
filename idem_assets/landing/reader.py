"""Reading landing files into contract-typed batches; see docs/landing.md for every rule."""

from __future__ import annotations

import datetime as dt
import hashlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from idem_assets.landing.contract import DayBeforeFirstDayError, SourceContract
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.files import (
    Discovery,
    Landing,
    LandingFile,
    discover_day,
    discover_snapshot,
    file_format,
    files_signature,
    is_gzip,
)
from idem_assets.landing.formats import read_raw
from idem_assets.landing.normalise import QUARANTINE_SCHEMA, empty_rows, normalise
from idem_assets.landing.store import LandingRoot, landing_root


@dataclass(frozen=True)
class LandingBatch:
    """Everything read for one source over a day range (or its newest snapshot)."""

    source: str
    start: dt.date | None  # days [start, end); None for snapshots
    end: dt.date | None
    rows: pa.Table  # valid rows, exactly the contract schema; not deduplicated
    quarantine: pa.Table  # QUARANTINE_SCHEMA
    files: tuple[LandingFile, ...]
    raw_rows: int  # every data row seen in every file
    dropped_columns: Mapping[str, tuple[str, ...]]  # relpath -> extra columns dropped
    ignored_files: Mapping[str, str] = field(default_factory=dict)  # relpath -> why not read
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # relpath -> remarks

    def __post_init__(self) -> None:
        if self.raw_rows != self.rows.num_rows + self.quarantine.num_rows:
            raise AssertionError(
                f"{self.source}: {self.raw_rows} raw rows but {self.rows.num_rows} valid "
                f"+ {self.quarantine.num_rows} quarantined"
            )

    @property
    def signature(self) -> str | None:
        """Fingerprint of the files read (same rule as day_signature); None if none."""
        return files_signature((f.relpath, f.sha256) for f in self.files)

    def day_signatures(self) -> dict[dt.date, str | None]:
        """Per-day fingerprints of a daily batch, equal to day_signature for each day."""
        if self.start is None or self.end is None:
            return {}
        out: dict[dt.date, str | None] = {}
        for offset in range((self.end - self.start).days):
            day = self.start + dt.timedelta(days=offset)
            out[day] = files_signature((f.relpath, f.sha256) for f in self.files if f.day == day)
        return out


@dataclass
class _Accumulator:
    contract: SourceContract
    root: LandingRoot
    rows: list[pa.Table] = field(default_factory=list)
    quarantine: list[pa.Table] = field(default_factory=list)
    files: list[LandingFile] = field(default_factory=list)
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def read(self, found: Discovery, partition_date: dt.date | None) -> None:
        self.ignored.update(found.ignored)
        # JSON Lines keeps these as text (file names: renames apply after reading).
        string_columns = frozenset(
            self.contract.file_name(f.name)
            for f in self.contract.schema
            if pa.types.is_string(f.type)
        )
        for item in found.files:
            relpath = item.relpath
            # The listed object's bytes (refused if it changed since it was listed),
            # parsed and hashed from the same bytes.
            data = self.root.read(item)
            fmt = file_format(relpath)
            assert fmt is not None
            content = _gunzip(data, relpath) if is_gzip(relpath) else data
            raw = read_raw(content, fmt, relpath, string_columns, self.contract.csv_delimiter)
            result = normalise(raw, self.contract, relpath, partition_date)
            self.rows.append(result.rows)
            self.quarantine.append(result.quarantine)
            if result.dropped_columns:
                self.dropped[relpath] = result.dropped_columns
            if raw.notes:
                self.notes[relpath] = raw.notes
            digest = hashlib.sha256(data).hexdigest()
            self.files.append(
                LandingFile(relpath, fmt, len(data), digest, raw.raw_rows, partition_date)
            )

    def batch(self, start: dt.date | None, end: dt.date | None) -> LandingBatch:
        rows = pa.concat_tables([empty_rows(self.contract), *self.rows])
        quarantine = pa.concat_tables([QUARANTINE_SCHEMA.empty_table(), *self.quarantine])
        return LandingBatch(
            source=self.contract.name,
            start=start,
            end=end,
            rows=rows.combine_chunks(),
            quarantine=quarantine.combine_chunks(),
            files=tuple(self.files),
            raw_rows=sum(f.rows for f in self.files),
            dropped_columns=dict(self.dropped),
            ignored_files=dict(self.ignored),
            notes=dict(self.notes),
        )


# Decompressed text beyond this many times its compressed size is refused: real exports
# compress 3-20x, a gzip bomb thousands of times.
MAX_GZIP_RATIO = 200
_MIN_GZIP_BOUND = 64 << 20


def _gunzip(data: bytes, relpath: str) -> bytes:
    """The bytes inside a gzip file, bounded; a corrupt or truncated file names itself."""
    bound = max(_MIN_GZIP_BOUND, len(data) * MAX_GZIP_RATIO)
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = bytearray()
    rest = data
    try:
        while rest:
            out += inflater.decompress(rest, bound + 1 - len(out))
            if len(out) > bound:
                raise LandingFileError(
                    relpath,
                    f"gzip content is over {bound} bytes ({MAX_GZIP_RATIO}x the file): "
                    "refused as a likely gzip bomb; split the file",
                )
            if inflater.unconsumed_tail:
                rest = inflater.unconsumed_tail
                continue
            if not inflater.eof:
                raise LandingFileError(relpath, "gzip stream is truncated; re-deliver the file")
            rest = inflater.unused_data  # concatenated gzip members (as `cat a.gz b.gz`)
            if rest:
                inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        raise LandingFileError(relpath, f"not a readable gzip file ({exc}); re-deliver it") from exc
    return bytes(out)


def read_days(
    landing: Landing,
    contract: SourceContract,
    start: dt.date,
    end: dt.date,
    found: Mapping[dt.date, Discovery] | None = None,
) -> LandingBatch:
    """Read the days [start, end) of a daily source; raises LandingFileError on unreadable files.

    ``found`` are the days' discoveries when the caller listed them already (so what is
    read is exactly what it signed); files changed since are refused, naming the file.
    Days before the source's first partition day raise ``DayBeforeFirstDayError``.
    """
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source; use read_snapshot")
    if end < start:
        raise ValueError(f"end {end} is before start {start}; the range is [start, end)")
    early = [
        start + dt.timedelta(days=i)
        for i in range((end - start).days)
        if contract.before_first_day(start + dt.timedelta(days=i))
    ]
    if early:
        raise DayBeforeFirstDayError(contract, early)
    root = landing_root(landing)
    acc = _Accumulator(contract, root)
    for offset in range((end - start).days):
        day = start + dt.timedelta(days=offset)
        listed = found.get(day) if found is not None else None
        acc.read(listed if listed is not None else discover_day(root, contract, day), day)
    return acc.batch(start, end)


def read_snapshot(
    landing: Landing, contract: SourceContract, found: Discovery | None = None
) -> LandingBatch:
    """Read the newest snapshot file: the greatest file name in the snapshot folder."""
    if contract.daily:
        raise ValueError(f"{contract.name} is a daily source; use read_days")
    root = landing_root(landing)
    acc = _Accumulator(contract, root)
    acc.read(found if found is not None else discover_snapshot(root, contract), None)
    return acc.batch(None, None)
