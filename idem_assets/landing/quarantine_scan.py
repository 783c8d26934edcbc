"""Which data files of the shared quarantine table hold an erased key, on storage.

The same scan as ``lake.erasure.files_holding`` (every Parquet file under the table's folder:
current, removed by a commit, change data, added by no commit), with the quarantine's rule
for what a row holds (``landing.erasure``): a file of a source declaring no erased
key's column is ruled out by its ``source=`` folder, the others' raw records are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from idem_assets._lazy import lazy_module
from idem_assets.lake.erasure import Erased, FileScan, scan_folder
from idem_assets.lake.tables import LakeTable
from idem_assets.landing.erasure import (
    ErasableSources,
    keys_in_records,
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
    declared = tuple(sorted({column for columns in sources.values() for column in columns}))

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
            records = pq.read_table(handle, columns=["raw_record"]).column("raw_record")
        # A file outside the usual layout says nothing of its source: any declaring one's
        # keys count.
        spelled = wanted[source] if source is not None else spellings(erased, declared)
        return set().union(*keys_in_records(records, spelled).values()), "read"

    return scan_folder(target, held_in)


def _source_folder(relative: str) -> str | None:
    """The source a file's ``source=`` partition folder names, if it is in one."""
    for part in relative.split("/")[:-1]:
        if part.startswith(_SOURCE_FOLDER):
            return unquote(part[len(_SOURCE_FOLDER) :])
    return None
