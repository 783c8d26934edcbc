"""Staged writes: Parquet files written into the table location, then committed in one go
(``commit_staged``, through ``lake.delta_log.commit``; as a MERGE of the rows that change
on a table keeping a change data feed)."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from idem_assets._lazy import lazy_module
from idem_assets.lake.change_data import feeds_changes, merge_changed_rows
from idem_assets.lake.delta_log import (
    NULL_PARTITION,
    StagedFile,
    commit,
    footer_stats,
    partition_text,
    require_plain_table,
    typed_partition_value,
)
from idem_assets.lake.fingerprint import Fingerprint, fingerprint_batches
from idem_assets.lake.frames import nullable
from idem_assets.lake.predicates import Condition, In, date_range
from idem_assets.lake.stored import DataFile, data_files, file_batches, filesystem, parquet_batches
from idem_assets.lake.tables import LakeTable, table_schema
from idem_assets.transient import retrying

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pafs = lazy_module("pyarrow.fs")
    pq = lazy_module("pyarrow.parquet")


STREAM_PREFIX = "stream-"
# Rows per staged file of a streamed write (a few hundred MB of Parquet at most).
ROWS_PER_FILE = 2_000_000


@dataclass(frozen=True)
class StagedWrite:
    """Files staged under one folder of the table, not yet committed.

    The folder is ``<table>/<prefix>-<id>/`` (``<partition>=<value>/….parquet`` inside
    it); nothing in it is part of the table until a Delta commit adds its files, and
    ``discard`` deletes it when the commit is skipped or lost. Add actions are built from
    each file's footer (size, rows, min/max/null counts per column), so no row passes
    through memory for that. Spark executors stage files this way, and so does the local
    engine for streamed writes (``lake.overwrite.overwrite_stream``): delta-rs's own writer
    buffers a partitioned stream in memory.
    """

    table_uri: str
    folder: str
    files: tuple[StagedFile, ...]
    partition_column: str | None

    @property
    def rows(self) -> int:
        """Rows in all staged files (from their footers)."""
        return sum(f.rows for f in self.files)

    def add_actions(self) -> list[AddAction]:
        """Delta add actions for every staged file (paths relative to the table root)."""
        return [f.add_action(self.partition_column) for f in self.files]

    def batches(self, schema: pa.Schema) -> Iterator[pa.Table]:
        """The staged rows, file by file in bounded batches, typed to ``schema``."""
        fs, base = filesystem(self.table_uri)
        column = self.partition_column
        for staged in self.files:
            value = (
                typed_partition_value(staged.partition_value, schema.field(column).type)
                if column
                else None
            )
            yield from parquet_batches(fs, f"{base}/{staged.path}", schema, column, value)

    def fingerprint(self, schema: pa.Schema) -> Fingerprint:
        """Fingerprint of the staged rows, computed batch by batch in flat driver memory."""
        return fingerprint_batches(self.batches(schema))

    def discard(self) -> None:
        """Delete the staging folder (the files were never committed)."""
        remove_folder(self.table_uri, self.folder)


def remove_folder(table_uri: str, folder: str) -> None:
    """Delete ``<table>/<folder>`` and everything in it, if it exists."""
    fs, base = filesystem(table_uri)
    target = f"{base}/{folder}"
    if fs.get_file_info(target).type != pafs.FileType.NotFound:
        fs.delete_dir(target)


def _is_hidden(name: str) -> bool:
    # Hadoop's .crc checksums and a committer's _SUCCESS / _temporary are never data.
    return name.startswith((".", "_"))


def list_staged(
    table_uri: str, folder: str, schema: pa.Schema, partition_column: str | None
) -> tuple[StagedFile, ...]:
    """Describe every data file under a staging folder from its footer (listed and read
    again whole when an answer is cut mid-body)."""
    return retrying(
        lambda: _list_staged(table_uri, folder, schema, partition_column), f"{table_uri}/{folder}"
    )


def _list_staged(
    table_uri: str, folder: str, schema: pa.Schema, partition_column: str | None
) -> tuple[StagedFile, ...]:
    fs, base = filesystem(table_uri)
    selector = pafs.FileSelector(f"{base}/{folder}", recursive=True, allow_not_found=True)
    files = []
    for info in fs.get_file_info(selector):
        relative = info.path[len(base) + 1 :]
        if info.type != pafs.FileType.File or any(_is_hidden(p) for p in relative.split("/")):
            continue
        value = None
        if partition_column:
            segment = next(
                (p for p in relative.split("/")[1:-1] if p.startswith(f"{partition_column}=")), None
            )
            if segment is None:
                raise RuntimeError(
                    f"staged file {relative} is outside a {partition_column}= folder"
                )
            text = unquote(segment.split("=", 1)[1])
            value = None if text == NULL_PARTITION else text
        with fs.open_input_file(info.path) as handle:
            metadata = pq.ParquetFile(handle).metadata
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns else int(time.time() * 1000)
        files.append(
            StagedFile(
                relative, info.size, metadata.num_rows, value, footer_stats(metadata, schema), mtime
            )
        )
    return tuple(sorted(files, key=lambda f: f.path))


@contextlib.contextmanager
def discarded_on_failure(target: LakeTable, staged: StagedWrite) -> Iterator[None]:
    """Delete ``staged``'s files if the block fails, unless a commit did take them.

    A commit can succeed and still raise (a post-commit hook failing); deleting files the
    log now references would corrupt the table, so the log is checked first.
    """
    try:
        yield
    except BaseException:
        table = target.open()
        committed = {f.path for f in data_files(table, None)} if table is not None else set()
        if not {f.path for f in staged.files} & committed:
            staged.discard()
        raise


def _by_partition(rows: pa.Table, column: str | None) -> Iterator[tuple[str | None, pa.Table]]:
    if column is None:
        yield None, rows
        return
    values = pc.unique(rows.column(column)).to_pylist()
    if len(values) == 1:
        yield partition_text(values[0]), rows
        return
    for value in values:
        kind = rows.schema.field(column).type
        mask = (
            pc.is_null(rows.column(column))
            if value is None
            else pc.equal(rows.column(column), pa.scalar(value, kind))
        )
        yield partition_text(value), rows.filter(mask)


def stage_batches(
    target: LakeTable,
    batches: Iterable[pa.Table],
    schema: pa.Schema,
    partition_column: str | None,
    *,
    prefix: str = STREAM_PREFIX,
    rows_per_file: int = ROWS_PER_FILE,
) -> StagedWrite:
    """Write ``batches`` (typed to ``schema``) as Parquet files under a new staging folder.

    One file is open per partition value and rolls over at ``rows_per_file``; each batch
    is written as it arrives, so memory holds a batch and the writers' buffers, never the
    whole stream. If the source fails, the folder is deleted and the error re-raised.
    """
    schema = nullable(schema)
    file_schema = (
        schema.remove(schema.get_field_index(partition_column)) if partition_column else schema
    )
    folder = f"{prefix}{uuid.uuid4().hex}"
    fs, base = filesystem(target.uri)
    writers: dict[str | None, tuple[pq.ParquetWriter, int]] = {}
    numbers = itertools.count()

    def open_writer(text: str | None) -> pq.ParquetWriter:
        parent = f"{base}/{folder}" + (
            f"/{partition_column}={quote(text or '')}" if partition_column else ""
        )
        fs.create_dir(parent, recursive=True)
        return pq.ParquetWriter(
            f"{parent}/part-{next(numbers):05d}.parquet",
            file_schema,
            filesystem=fs,
            compression="snappy",
        )

    try:
        for rows in batches:
            for text, part in _by_partition(rows, partition_column):
                writer, written = writers.pop(text, None) or (open_writer(text), 0)
                writer.write_table(part.select(file_schema.names).cast(file_schema))
                written += part.num_rows
                if written >= rows_per_file:
                    writer.close()
                else:
                    writers[text] = (writer, written)
        while writers:
            writers.popitem()[1][0].close()
        files = list_staged(target.uri, folder, schema, partition_column)
    except BaseException:
        for writer, _ in writers.values():
            with contextlib.suppress(Exception):
                writer.close()
        remove_folder(target.uri, folder)
        raise
    return StagedWrite(target.uri, folder, files, partition_column)


def commit_overwrite(
    target: LakeTable,
    table: DeltaTable | None,
    staged: StagedWrite,
    schema: pa.Schema,
    start: dt.date,
    end: dt.date,
    properties: CommitProperties,
) -> int:
    """Commit ``staged`` as the new content of partitions ``[start, end)``; the new version.

    One transaction adds the staged files and removes the range's old ones (creating the
    table when there is none). A concurrent commit makes it fail: the caller re-decides.
    """
    if staged.partition_column is None:
        raise ValueError("a range overwrite needs staged files laid out by a partition column")
    return commit_staged(
        target, table, staged, properties, schema=schema, replace_range=(start, end)
    )


def commit_staged(
    target: LakeTable,
    table: DeltaTable | None,
    staged: StagedWrite,
    properties: CommitProperties,
    *,
    schema: pa.Schema,
    replace_range: tuple[dt.date, dt.date] | None = None,
    removes: Sequence[RemoveAction] = (),
    change_key: Sequence[str] = (),
) -> int:
    """Commit ``staged`` in one transaction; the version it made.

    With no table, the commit creates it with ``schema``. ``replace_range`` ``(start, end)``
    makes the staged files the whole content of those date partitions; otherwise they are
    added, with ``removes`` taken out in the same commit. A concurrent commit makes it fail
    (delta-rs's retries are off): the caller decides again.

    On a table keeping a change feed, files that replace others are not committed as they
    are (the feed would delete and insert every row of them): the staged rows are compared
    with the replaced files' rows partition by partition, and one MERGE sends only the rows
    that differ (``lake.change_data``), named by ``change_key`` where it names each row
    once. The staged files are then deleted.
    """
    column = staged.partition_column
    if table is not None:
        require_plain_table(table, column, schema)
        if feeds_changes(table) and (replace_range is not None or removes):
            version = _merge_changes(table, staged, properties, replace_range, removes, change_key)
            staged.discard()
            return table.version() if version is None else version
    return commit(
        target,
        table,
        staged.add_actions(),
        properties,
        schema=schema if table is None else table_schema(table),
        partition_column=column,
        removes=removes,
        replace_range=replace_range,
    )


def _merge_changes(
    table: DeltaTable,
    staged: StagedWrite,
    properties: CommitProperties,
    replace_range: tuple[dt.date, dt.date] | None,
    removes: Sequence[RemoveAction],
    change_key: Sequence[str],
) -> int | None:
    """The staged commit of a table keeping a change feed: the rows that differ from the
    replaced files', in one MERGE (None: no row differs)."""
    schema = table_schema(table)
    column = staged.partition_column
    kind = schema.field(column).type if column else None
    if replace_range is not None:
        assert column is not None
        scope: list[Condition] = [date_range(column, *replace_range)]
        start, end = replace_range
        replaced = data_files(
            table,
            column,
            lambda v: v is not None and start <= v < end,  # type: ignore[operator]
        )
    else:
        replaced = [
            DataFile(
                r.path,
                r.size or 0,
                typed_partition_value((r.partition_values or {}).get(column), kind)
                if column and kind is not None
                else None,
            )
            for r in removes
        ]
        values = {f.partition_value for f in replaced}
        # The MERGE reads only the removed files' partitions (all files with a null one).
        scope = (
            [In(column, tuple(values))]  # type: ignore[arg-type]
            if column and values and None not in values
            else []
        )

    def parts() -> Iterator[tuple[pa.Table, pa.Table]]:
        # One partition at a time: memory holds a partition's old and new rows, and the
        # rows that differ.
        old_by: dict[str | None, list[DataFile]] = {}
        for data in replaced:
            value = data.partition_value
            old_by.setdefault(None if value is None else partition_text(value), []).append(data)
        new_by: dict[str | None, list[StagedFile]] = {}
        for staged_file in staged.files:
            new_by.setdefault(staged_file.partition_value if column else None, []).append(
                staged_file
            )
        empty = nullable(schema).empty_table()
        for text in sorted(old_by.keys() | new_by.keys(), key=lambda t: t or ""):
            part = StagedWrite(staged.table_uri, staged.folder, tuple(new_by.get(text, ())), column)
            new = pa.concat_tables([empty, *part.batches(schema)])
            old = pa.concat_tables([empty, *file_batches(table, old_by.get(text, []), column)])
            yield old, new

    return merge_changed_rows(table, parts, key=change_key, prune=scope, properties=properties)
