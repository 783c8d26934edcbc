"""Erasure: a key's rows removed from a table in one commit, and kept out of every write.

Deleting a person's rows is not enough where tables are recomputed from landing files: a
rerun or backfill of an old day reads the files again and brings the rows back. So an
erased key is also a filter (``Erased``) that every later write applies to its rows, on
every engine, and the files the delete removed from the table are found and reported
(``files_holding``) until vacuum deletes them after the retention.

Values are compared as text (``42`` matches an integer 42 and a string "42"): the key
arrives from a command line, and one spelling must reach every table that holds it. The
delete is a MERGE whose source table carries the value; no predicate is built from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import Attempt, commit_retried
from idem_assets.lake.history_deletes import DELETES_SUFFIX
from idem_assets.lake.merge import tombstones_table
from idem_assets.lake.predicates import all_of, quote_identifier
from idem_assets.lake.stored import filesystem
from idem_assets.lake.tables import LakeTable, commit_properties, table_schema

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pafs = lazy_module("pyarrow.fs")

_SOURCE, _TARGET = "s", "t"


def key_digest(column: str, value: str) -> str:
    """How an erased key is named wherever it may be seen (logs, metadata, reports): the
    value itself is never shown."""
    return hashlib.sha256(f"{column}\0{value}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Erased:
    """The erased values of each key column, as text."""

    values: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.values.values())

    def of(self, columns: Iterable[str]) -> Erased:
        """Only the key columns among ``columns``."""
        wanted = set(columns)
        return Erased({c: v for c, v in self.values.items() if c in wanted and v})

    def digest(self) -> str:
        """Changes whenever a key is erased (a stamp for results that depend on the set)."""
        text = "\n".join(
            key_digest(column, value)
            for column in sorted(self.values)
            for value in sorted(self.values[column])
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def held(self, rows: pa.Table | pa.RecordBatch) -> pa.ChunkedArray | pa.Array:
        """True for each row holding an erased key (of a column the rows have)."""
        mask = pa.array([False] * rows.num_rows, pa.bool_())
        for column, values in self.values.items():
            if column in rows.schema.names and values:
                text = pc.cast(rows.column(column), pa.string())
                found = pc.is_in(text, value_set=pa.array(sorted(values), pa.string()))
                mask = pc.or_(mask, pc.fill_null(found, False))
        return mask

    def without(self, rows: pa.Table) -> tuple[pa.Table, int]:
        """``rows`` without those holding an erased key, and how many were taken out."""
        if not self.of(rows.schema.names):
            return rows, 0
        held = self.held(rows)
        kept = rows.filter(pc.invert(held))
        return kept, rows.num_rows - kept.num_rows

    def without_batches(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A record-batch stream without the rows holding an erased key."""
        for batch in batches:
            yield batch.filter(pc.invert(self.held(batch))) if self else batch


@dataclass(frozen=True)
class ErasedFrom:
    """What erasing a key did to one table."""

    uri: str
    version: int | None  # the erase commit (None: the table held no such row)
    rows_deleted: int
    # Data files the commit removed from the table: they still hold the key on storage
    # until vacuum deletes them.
    files_removed: tuple[str, ...]


def erase_key(
    target: LakeTable, column: str, value: str, commit_metadata: Mapping[str, str] | None = None
) -> ErasedFrom:
    """Delete every row of ``target`` whose ``column`` is ``value`` (as text), in one commit;
    nothing is committed when no row holds it (erasing again is a no-op)."""
    quote_identifier(column)  # a plain identifier, or an error before anything is read

    def once(attempt: Attempt) -> ErasedFrom:
        table = attempt.table
        if table is None or column not in table_schema(table).names:
            return ErasedFrom(target.uri, None, 0, ())
        kind = table_schema(table).field(column).type
        source = pa.table({column: pa.array([value], pa.string()).cast(kind)})
        before = set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
        metrics = (
            table.merge(
                source,
                predicate=all_of(
                    f"{quote_identifier(column, _TARGET)} = {quote_identifier(column, _SOURCE)}"
                ),
                source_alias=_SOURCE,
                target_alias=_TARGET,
                commit_properties=commit_properties(
                    {**(commit_metadata or {}), "idem.erased": key_digest(column, value)}
                ),
            )
            .when_matched_delete()
            .execute()
        )
        deleted = int(metrics.get("num_target_rows_deleted", 0))
        if not deleted:
            return ErasedFrom(target.uri, None, 0, ())
        after = set(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())
        return ErasedFrom(target.uri, table.version(), deleted, tuple(sorted(before - after)))

    return commit_retried(target, "erase", once)


def satellites(target: LakeTable) -> list[LakeTable]:
    """The tables kept beside ``target`` that hold its keys too (a merge's tombstones, a
    history's deletes)."""
    return [
        tombstones_table(target),
        LakeTable(f"{target.uri}{DELETES_SUFFIX}", target.storage_options),
    ]


def files_holding(target: LakeTable, paths: Iterable[str]) -> list[str]:
    """Which of ``paths`` (data files an erase removed, relative to the table) are still on
    storage: they hold the erased key until vacuum deletes them."""
    still = []
    for path in paths:
        location = path if "://" in path or path.startswith("/") else f"{target.uri}/{path}"
        fs, inner = filesystem(location)
        if fs.get_file_info(inner).type != pafs.FileType.NotFound:
            still.append(path)
    return still
