"""Which data files of the shared quarantine table hold an erased key, on storage.

The same scan as ``lake.erasure.files_holding`` (every Parquet file under the table's folder:
current, removed by a commit, change data, added by no commit), with the quarantine's rule
for what a row holds (``quarantine_erasure``): a file of a source declaring no erased
key's column is ruled out by its ``source=`` folder, the others' raw records are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from idem_assets._lazy import lazy_module
from idem_assets.lake.erasure import Erased, FileScan, scan_folder
from idem_assets.lake.tables import LakeTable
from idem_assets.landing.quarantine_erasure import (
    ErasableSources,
    Spellings,
    keys_in_records,
    quarantine_held,
    spellings,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
else:
    pq = lazy_module("pyarrow.parquet")  # imported on first use: see idem_assets._lazy

_SOURCE_FOLDER = "source="


def quarantine_files_holding(
    target: LakeTable, erased: Erased, sources: ErasableSources
) -> FileScan:
    """Every data file under the quarantine table ``target``'s folder holding a key of
    ``erased`` in a row of a source declaring its column erasable (``sources``)."""
    wanted = {source: spellings(erased, columns) for source, columns in sources.items()}
    wanted = {source: spelled for source, spelled in wanted.items() if spelled}
    if not wanted:
        return FileScan(target.uri, (), 0, 0, 0)

    def held_in(
        fs: pafs.FileSystem,
        path: str,
        relative: str,
        logged: Mapping[str, tuple[object, object]] | None,
    ) -> tuple[set[str], str]:
        del logged  # statistics of a JSON text never rule a key out
        source = _source_folder(relative)
        if source is not None and source not in wanted:
            return set(), "statistics"  # decided by the partition folder
        with fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            named = source is None and "source" in parquet.schema_arrow.names
            rows = parquet.read(columns=["source", "raw_record"] if named else ["raw_record"])
        if source is not None:
            return _digests(keys_in_records(rows.column("raw_record"), wanted[source])), "read"
        if named:  # a file outside the usual layout: its rows name their source
            held = rows.filter(quarantine_held(rows, erased, sources))
            found: set[str] = set()
            for name in set(held.column("source").to_pylist()):
                records = held.filter(held.column("source") == name)  # type: ignore[arg-type]
                found |= _digests(keys_in_records(records.column("raw_record"), wanted[name]))
            return found, "read"
        # Nothing says whose rows these are: any declaring source's keys count.
        return _digests(keys_in_records(rows.column("raw_record"), _union(wanted))), "read"

    return scan_folder(target, held_in)


def _source_folder(relative: str) -> str | None:
    """The source a file's ``source=`` partition folder names, if it is in one."""
    for part in relative.split("/")[:-1]:
        if part.startswith(_SOURCE_FOLDER):
            return unquote(part[len(_SOURCE_FOLDER) :])
    return None


def _digests(found: Mapping[int, set[str]]) -> set[str]:
    return set().union(*found.values())


def _union(wanted: Mapping[str, Spellings]) -> Spellings:
    out: dict[str, dict[str, frozenset[str]]] = {}
    for spelled in wanted.values():
        for column, texts in spelled.items():
            for text, values in texts.items():
                into = out.setdefault(column, {})
                into[text] = into.get(text, frozenset()) | values
    return out
