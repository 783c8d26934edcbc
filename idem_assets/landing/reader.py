"""Reading landing files into contract-typed batches; see docs/landing.md for every rule."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import hashlib
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
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
from idem_assets.landing.formats import TextDialect, read_raw
from idem_assets.landing.normalise import empty_rows, normalise, quarantine_schema
from idem_assets.landing.pieces import PIECE_BYTES, Piece, gunzip_chunks, text_pieces
from idem_assets.landing.raw import RawRows
from idem_assets.landing.store import LandingObject, LandingRoot, landing_root

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclass(frozen=True)
class LandingBatch:
    """Everything read for one source over a day range (or its newest snapshot)."""

    source: str
    start: dt.date | None  # days [start, end); None for snapshots
    end: dt.date | None
    rows: pa.Table  # valid rows, exactly the contract schema; not deduplicated
    quarantine: pa.Table  # quarantine_schema()
    files: tuple[LandingFile, ...]
    raw_rows: int  # every data row seen in every file
    dropped_columns: Mapping[str, tuple[str, ...]]  # relpath -> extra columns dropped
    ignored_files: Mapping[str, str] = field(default_factory=dict)  # relpath -> why not read
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # relpath -> remarks
    # column -> {declared null spelling: values read as null}
    null_spellings: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # Valid rows per day folder, in the order ``rows`` holds them (each day's are adjacent).
    rows_per_day: Mapping[dt.date | None, int] = field(default_factory=dict)

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

    def row_days(self) -> pa.Array:
        """The day folder each valid row was read from (date32; null for a snapshot)."""
        import numpy as np  # here, not at import: see idem_assets._lazy

        if self.rows.num_rows and sum(self.rows_per_day.values()) != self.rows.num_rows:
            raise AssertionError(f"{self.source}: rows per day do not add up to the rows read")
        days = list(self.rows_per_day)
        index = np.repeat(np.arange(len(days)), list(self.rows_per_day.values()))
        return pa.array(days, pa.date32()).take(pa.array(index, pa.int64()))

    def day_signatures(self) -> dict[dt.date, str | None]:
        """Per-day fingerprints of a daily batch, equal to day_signature for each day."""
        if self.start is None or self.end is None:
            return {}
        out: dict[dt.date, str | None] = {}
        for offset in range((self.end - self.start).days):
            day = self.start + dt.timedelta(days=offset)
            out[day] = files_signature((f.relpath, f.sha256) for f in self.files if f.day == day)
        return out


@dataclass(frozen=True)
class PieceRows:
    """One piece of a file, read: its typed rows and its quarantine rows."""

    index: int  # the piece's place in its file
    rows: pa.Table  # exactly the contract schema
    quarantine: pa.Table  # quarantine_schema()


class FileReader:
    """One landing file read piece by piece (``idem_assets.landing.pieces``), so memory is
    bounded by a piece; both engines read every file through it.

    Iterate for each piece's rows; afterwards ``file``, ``dropped_columns`` and ``notes``
    describe the whole file. ``chunks`` are the file's bytes as delivered (hashed as they
    pass). A JSON Lines piece that lacks a contract column waits until a later piece shows
    the file has it (then it reads as null there), or the file ends without it (then every
    row of the file is quarantined for it), so pieces judge exactly as the whole file would.
    """

    def __init__(
        self,
        chunks: Iterable[bytes],
        relpath: str,
        contract: SourceContract,
        day: dt.date | None,
        size: int | None = None,
        piece_bytes: int = PIECE_BYTES,
    ) -> None:
        fmt = file_format(relpath, contract.csv_suffixes)
        if fmt is None:
            raise LandingFileError(relpath, "has no landing file suffix")
        self.format = fmt
        self.relpath = relpath
        self.contract = contract
        self.day = day
        self.size = size
        self.piece_bytes = piece_bytes
        self._chunks = chunks
        self._names: dict[str, None] = {}
        self.dropped_columns: tuple[str, ...] = ()
        self.notes: tuple[str, ...] = ()
        # Column -> {declared null spelling: values read as null}, over the whole file.
        self.null_spellings: dict[str, dict[str, int]] = {}
        self._file: LandingFile | None = None

    @property
    def file(self) -> LandingFile:
        """What was read (after iterating)."""
        assert self._file is not None, "iterate the reader first"
        return self._file

    def __iter__(self) -> Iterator[PieceRows]:
        digest = hashlib.sha256()
        total = 0

        def hashed() -> Iterator[bytes]:
            nonlocal total
            for chunk in self._chunks:
                digest.update(chunk)
                total += len(chunk)
                yield chunk

        relpath, fmt, contract = self.relpath, self.format, self.contract
        if fmt == "parquet":
            pieces: Iterable[Piece] = [Piece(0, b"".join(hashed()), 0)]
        else:
            raw_bytes: Iterable[bytes] = hashed()
            if is_gzip(relpath):
                raw_bytes = gunzip_chunks(raw_bytes, relpath, self.size or 0)
            text = as_utf8(raw_bytes, contract.encoding)
            header = None if fmt != "csv" or contract.csv_header else headerless_line(contract)
            pieces = text_pieces(text, fmt, self.piece_bytes, header)
        dialect = TextDialect(
            contract.csv_delimiter,
            contract.csv_trailing_delimiter,
            contract.encoding,
            contract.csv_header,
        )
        # JSON Lines keeps these as text (file names: renames apply after reading).
        strings = frozenset(
            contract.file_name(f.name) for f in contract.schema if pa.types.is_string(f.type)
        )
        rows_before = 0
        held: list[tuple[int, RawRows]] = []
        for piece in pieces:
            raw = read_raw(piece.data, fmt, relpath, strings, dialect, piece.line_offset)
            raw = raw.shifted(rows_before)
            rows_before += raw.raw_rows
            self.notes = tuple(dict.fromkeys((*self.notes, *raw.notes)))
            self._names.update(dict.fromkeys(raw.table.column_names))
            if fmt == "jsonl":
                if raw.table.num_rows and self._lacks_columns():
                    held.append((piece.index, raw))
                    continue
                if held and not self._lacks_columns():
                    yield from (self._judge(i, r) for i, r in held)
                    held = []
            yield self._judge(piece.index, raw)
        yield from (self._judge(i, r) for i, r in held)
        if self.size is not None and total != self.size:
            raise LandingFileError(
                relpath,
                f"{total} bytes read but {self.size} listed: it changed while it was read; "
                "rerun once the producer has finished writing it",
            )
        self._file = LandingFile(relpath, fmt, total, digest.hexdigest(), rows_before, self.day)

    def _lacks_columns(self) -> bool:
        return any(
            self.contract.file_name(c) not in self._names for c in self.contract.file_read_columns
        )

    def _judge(self, index: int, raw: RawRows) -> PieceRows:
        names = list(self._names) if self.format == "jsonl" else None
        result = normalise(raw, self.contract, self.relpath, self.day, names, self.format)
        self.dropped_columns = tuple(
            dict.fromkeys((*self.dropped_columns, *result.dropped_columns))
        )
        for column, counts in result.null_spellings.items():
            seen = self.null_spellings.setdefault(column, {})
            for spelling, count in counts.items():
                seen[spelling] = seen.get(spelling, 0) + count
        return PieceRows(index, result.rows, result.quarantine)


def headerless_line(contract: SourceContract) -> bytes:
    """The header a headerless CSV would have: its columns in declared order."""
    names = [contract.file_name(c) for c in contract.file_read_columns]
    out = io.StringIO()
    csv.writer(out, delimiter=contract.csv_delimiter, lineterminator="\n").writerow(
        [*names, ""] if contract.csv_trailing_delimiter else names
    )
    return out.getvalue().encode("utf-8")


def _as_lone_surrogates(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    bad = error.object[error.start : error.end]
    return "".join(chr(0xDC00 + byte) for byte in bad), error.end


# Bytes a declared encoding does not define become lone surrogates, written out as bytes
# no UTF-8 reader accepts: the row holding them is quarantined, the rest reads on.
_INVALID = "idem-assets.invalid-bytes"
codecs.register_error(_INVALID, _as_lone_surrogates)


def as_utf8(chunks: Iterable[bytes], encoding: str) -> Iterator[bytes]:
    """Text in the declared encoding, as UTF-8 (the parsers' input). Bytes the encoding does
    not define come through as invalid UTF-8, so exactly their rows are quarantined."""
    if encoding == "utf-8":
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder(encoding)(errors=_INVALID)
    for chunk in chunks:
        if text := decoder.decode(chunk):
            yield text.encode("utf-8", "surrogatepass")
    if rest := decoder.decode(b"", final=True):
        yield rest.encode("utf-8", "surrogatepass")


def read_file(
    root: LandingRoot,
    contract: SourceContract,
    item: LandingObject,
    day: dt.date | None,
    piece_bytes: int = PIECE_BYTES,
) -> tuple[FileReader, list[PieceRows]]:
    """A listed file read whole, its pieces in file order (the local engine's way)."""
    reader = FileReader(root.chunks(item), item.relpath, contract, day, item.size, piece_bytes)
    return reader, sorted(reader, key=lambda p: p.index)


@dataclass
class _Accumulator:
    contract: SourceContract
    root: LandingRoot
    piece_bytes: int = PIECE_BYTES
    rows: list[pa.Table] = field(default_factory=list)
    quarantine: list[pa.Table] = field(default_factory=list)
    files: list[LandingFile] = field(default_factory=list)
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    null_spellings: dict[str, dict[str, int]] = field(default_factory=dict)
    rows_per_day: dict[dt.date | None, int] = field(default_factory=dict)

    def read(self, found: Discovery, partition_date: dt.date | None) -> None:
        self.ignored.update(found.ignored)
        for item in found.files:
            # The listed object's bytes (refused if it changed since it was listed),
            # parsed and hashed as they stream.
            reader, pieces = read_file(
                self.root, self.contract, item, partition_date, self.piece_bytes
            )
            self.rows.extend(p.rows for p in pieces)
            self.rows_per_day[partition_date] = self.rows_per_day.get(partition_date, 0) + sum(
                p.rows.num_rows for p in pieces
            )
            self.quarantine.extend(p.quarantine for p in pieces)
            if reader.dropped_columns:
                self.dropped[item.relpath] = reader.dropped_columns
            if reader.notes:
                self.notes[item.relpath] = reader.notes
            for column, counts in reader.null_spellings.items():
                seen = self.null_spellings.setdefault(column, {})
                for spelling, count in counts.items():
                    seen[spelling] = seen.get(spelling, 0) + count
            self.files.append(reader.file)

    def batch(self, start: dt.date | None, end: dt.date | None) -> LandingBatch:
        rows = pa.concat_tables([empty_rows(self.contract), *self.rows])
        quarantine = pa.concat_tables([quarantine_schema().empty_table(), *self.quarantine])
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
            null_spellings={
                c: dict(sorted(n.items())) for c, n in sorted(self.null_spellings.items())
            },
            rows_per_day=dict(self.rows_per_day),
        )


def window_days(contract: SourceContract, start: dt.date, end: dt.date) -> list[dt.date]:
    """The days [start, end) of a daily source that a read may cover (every engine's rule).

    A snapshot source, a reversed range and days before the first partition day are refused
    (``DayBeforeFirstDayError`` for the latter).
    """
    if not contract.daily:
        raise ValueError(f"{contract.name} is a snapshot source; use read_snapshot")
    if end < start:
        raise ValueError(f"end {end} is before start {start}; the range is [start, end)")
    days = [start + dt.timedelta(days=i) for i in range((end - start).days)]
    early = [day for day in days if contract.before_first_day(day)]
    if early:
        raise DayBeforeFirstDayError(contract, early)
    return days


def read_days(
    landing: Landing,
    contract: SourceContract,
    start: dt.date,
    end: dt.date,
    found: Mapping[dt.date, Discovery] | None = None,
    piece_bytes: int = PIECE_BYTES,
) -> LandingBatch:
    """Read the days [start, end) of a daily source; raises LandingFileError on unreadable files.

    ``found`` are the days' discoveries when the caller listed them already (so what is
    read is exactly what it signed); files changed since are refused, naming the file.
    Days before the source's first partition day raise ``DayBeforeFirstDayError``.
    """
    days = window_days(contract, start, end)
    root = landing_root(landing)
    acc = _Accumulator(contract, root, piece_bytes)
    for day in days:
        listed = found.get(day) if found is not None else None
        acc.read(listed if listed is not None else discover_day(root, contract, day), day)
    return acc.batch(start, end)


def read_snapshot(
    landing: Landing,
    contract: SourceContract,
    found: Discovery | None = None,
    piece_bytes: int = PIECE_BYTES,
) -> LandingBatch:
    """Read the newest snapshot file: the greatest file name in the snapshot folder."""
    if contract.daily:
        raise ValueError(f"{contract.name} is a daily source; use read_days")
    root = landing_root(landing)
    acc = _Accumulator(contract, root, piece_bytes)
    acc.read(found if found is not None else discover_snapshot(root, contract), None)
    return acc.batch(None, None)
