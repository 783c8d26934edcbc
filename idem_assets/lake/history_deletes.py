"""The deletes of a history table, kept in a Delta table beside it.

A delete makes no history row, yet it must be remembered: it may arrive before the older
upsert it closes. Every delete (key columns, version) is kept in ``<table>__history_deletes``;
storing one again, in any order or from two writers at once, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltalake import DeltaTable, write_deltalake

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import Attempt, commit_retried
from idem_assets.lake.frames import conform, to_polars
from idem_assets.lake.maintenance import compact
from idem_assets.lake.tables import LakeTable, commit_properties, read_rows, rows_of_keys

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


# Each load appends a small file to the delete log and reads the log back: past this many
# files it is compacted, so a read stays a few files however many loads came before.
_LOG_FILES = 16
# And it is opened by every load: a checkpoint every few commits keeps that quick.
_LOG_CONFIG = {"delta.checkpointInterval": "10"}


DELETES_SUFFIX = "__history_deletes"


def history_deletes(target: LakeTable, key: Sequence[str], version_column: str) -> pa.Table:
    """Every delete stored beside the history ``target``: its key columns and version."""
    stored = LakeTable(f"{target.uri}{DELETES_SUFFIX}", target.storage_options).open()
    if stored is None:
        return pa.table({c: pa.array([], pa.null()) for c in (*key, version_column)})
    return read_rows(stored)


class BatchDeletes:
    """The deletes stored for one batch's keys, in the Delta table beside the history that
    keeps every delete (key, version); storing one again changes nothing."""

    def __init__(self, target: LakeTable, keys: pl.DataFrame, schema: pa.Schema) -> None:
        self.table = LakeTable(f"{target.uri}{DELETES_SUFFIX}", target.storage_options)
        self.keys = keys
        self.schema = schema  # the key columns, then the version column
        self._snapshot: DeltaTable | None = None
        self._read: tuple[pa.Table, int] | None = None

    def read(self) -> tuple[pa.Table, int]:
        """The stored deletes of the keys, and the version they were read at (-1: no log)."""
        return self._read_at(self._refreshed())

    def _refreshed(self) -> DeltaTable | None:
        """The log brought up to its newest version (None: no log yet)."""
        if self._snapshot is None:
            self._snapshot = self.table.open()
        else:
            self._snapshot.update_incremental()
        return self._snapshot

    def _read_at(self, snapshot: DeltaTable | None) -> tuple[pa.Table, int]:
        version = -1 if snapshot is None else snapshot.version()
        if self._read is None or self._read[1] != version:
            rows = rows_of_keys(snapshot, self.keys, self.schema)
            self._read = (conform(rows, self.schema), version)
        return self._read

    def remember(self, deletes: pa.Table) -> None:
        """Store the ``deletes`` not stored yet, in one append on the snapshot they were
        looked up in: if another writer committed meanwhile, look them up again."""
        columns = self.schema.names
        wanted = to_polars(conform(deletes, self.schema)).unique()

        def once(attempt: Attempt) -> None:
            stored, version = self._read_at(attempt.table)
            new = wanted.join(to_polars(stored), on=columns, how="anti").to_arrow()
            if not new.num_rows:
                return
            write_deltalake(
                attempt.table if attempt.table is not None else self.table.uri,
                new,
                mode="append" if version >= 0 else "error",
                configuration=None if version >= 0 else _LOG_CONFIG,
                storage_options=self.table.options(),
                commit_properties=commit_properties({"idem.history_deletes": new.num_rows}),
            )
            # Without internal retries our commit is the version after the one read.
            self._read = (pa.concat_tables([stored, conform(new, self.schema)]), version + 1)
            appended.append(new.num_rows)

        appended: list[int] = []
        if deletes.num_rows:
            commit_retried(self.table, "history_deletes", once, snapshot=self._refreshed)
        if appended:
            self.read()
            if self._snapshot is not None and len(self._snapshot.file_uris()) > _LOG_FILES:
                compact(self.table, commit_metadata={"idem.history_deletes": "compact"})
