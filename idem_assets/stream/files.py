"""Stream files: listing the landing folder, hashing a file, and reading one planned file.

Parsing, typing and quarantine reasons are the landing reader's (``read_raw`` and
``normalise``), applied to one file at a time; this module adds only the content check
against the sha256 the offset log recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from idem_assets._lazy import lazy_module
from idem_assets.landing.errors import LandingFileError
from idem_assets.landing.files import Landing, file_format, is_hidden
from idem_assets.landing.normalise import quarantine_schema
from idem_assets.landing.reader import FileReader
from idem_assets.landing.store import LandingObject, landing_root
from idem_assets.stream.errors import FileChangedError, StreamStateError
from idem_assets.stream.source import StreamSource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclass(frozen=True)
class OffsetFile:
    """One file of a planned batch: where it is and the bytes it must still have."""

    relpath: str  # posix, relative to the landing dir
    sha256: str
    size: int

    def as_json(self) -> list[Any]:
        """Compact JSON form kept in the offset log."""
        return [self.relpath, self.sha256, self.size]

    @classmethod
    def from_json(cls, value: Any, where: str) -> OffsetFile:
        """Parse ``as_json`` output; ``where`` names the log record in errors."""
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not isinstance(value[0], str)
            or not isinstance(value[1], str)
            or len(value[1]) != 64
            or not isinstance(value[2], int)
        ):
            raise StreamStateError(f"{where}: malformed file entry {value!r}")
        return cls(value[0], value[1], value[2])


@dataclass(frozen=True)
class FileRead:
    """One planned file read and checked: valid rows, quarantined rows, and what was seen."""

    entry: OffsetFile
    rows: pa.Table  # contract schema
    quarantine: pa.Table  # quarantine_schema(), source = stream name
    raw_rows: int
    dropped_columns: tuple[str, ...]
    notes: tuple[str, ...]


def list_stream_files(landing: Landing, source: StreamSource) -> list[LandingObject]:
    """The data files in the stream folder, in file-name order.

    The daily reader's rule: a half-written file (.name.tmp) is never planned.
    """
    folder = landing_root(landing).folder(source.name)
    if folder is None:
        return []
    return [f for f in folder.files if not is_hidden(f.name) and file_format(f.name) is not None]


def offset_file(landing: Landing, item: LandingObject) -> OffsetFile | None:
    """The offset entry for a listed file; None if it vanished or changed since it was listed."""
    try:
        sha = landing_root(landing).sha256(item)
    except LandingFileError:
        return None  # the next listing sees what is there now
    return OffsetFile(item.relpath, sha, item.size)


def read_offset_file(
    landing: Landing, source: StreamSource, entry: OffsetFile, seq: int
) -> FileRead:
    """Read a planned file, refusing it if its bytes differ from the plan.

    Raises FileChangedError (changed or gone) or the reader's LandingFileError (unreadable).
    The bytes hashed are the bytes parsed, so a file changing during the read is caught too.
    """
    data = landing_root(landing).fetch(entry.relpath)
    if data is None:
        raise FileChangedError(source.name, seq, entry.relpath, entry.sha256, None)
    actual = hashlib.sha256(data).hexdigest()
    if actual != entry.sha256:
        raise FileChangedError(source.name, seq, entry.relpath, entry.sha256, actual)
    if file_format(entry.relpath) is None:
        raise StreamStateError(f"{entry.relpath}: planned but has no landing file suffix")
    contract = source.contract
    reader = FileReader([data], entry.relpath, contract, None, len(data))
    pieces = sorted(reader, key=lambda p: p.index)
    return FileRead(
        entry,
        pa.concat_tables([contract.schema.empty_table(), *(p.rows for p in pieces)]),
        pa.concat_tables([quarantine_schema().empty_table(), *(p.quarantine for p in pieces)]),
        reader.file.rows,
        reader.dropped_columns,
        reader.notes,
    )


def notes_by_file(reads: Sequence[FileRead]) -> Mapping[str, list[str]]:
    """relpath -> reader remarks and dropped columns, for files that have any."""
    out: dict[str, list[str]] = {}
    for read in reads:
        remarks = [*read.notes, *(f"extra column dropped: {c}" for c in read.dropped_columns)]
        if remarks:
            out[read.entry.relpath] = remarks
    return out
