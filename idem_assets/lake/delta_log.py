"""The Delta log as the staged writers write it: file statistics from Parquet footers,
partition values as the log spells them, add and remove actions, the gate on table
features those writers cannot honour, ``commit``, the one entry point through which the
local streaming writer and the Spark engine's staged writes reach the log (by way of
``lake.staging.commit_staged``, which turns them into a MERGE on a table keeping a change
data feed), and
``commit_infos``, the one way the log's commit metadata is read back.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from deltalake import CommitProperties, DeltaTable, Schema
from deltalake.transaction import AddAction, RemoveAction

from idem_assets._lazy import lazy_module
from idem_assets.lake.change_data import feeds_changes
from idem_assets.lake.frames import is_text, nullable
from idem_assets.lake.stored import DataFile, filesystem
from idem_assets.lake.tables import LakeTable, create_table, table_retries, table_schema
from idem_assets.transient import retrying

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pq = lazy_module("pyarrow.parquet")


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Delta truncates string statistics; longer bounds are left out (always safe for pruning).
_MAX_STAT_CHARS = 64
# Table features that change neither how data files are read nor what a write must check.
_PLAIN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
# changeDataFeed: a staged commit that replaces files of such a table becomes a MERGE of the
# rows that change (``lake.staging.commit_staged``), which writes the feed's cdc files.
_PLAIN_WRITER_FEATURES = _PLAIN_READER_FEATURES | {
    "appendOnly",
    "checkpointProtection",
    "changeDataFeed",
}


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file an executor wrote, as the Delta log will describe it."""

    path: str  # relative to the table root
    size: int
    rows: int
    partition_value: str | None
    stats: str  # Delta statistics JSON
    modification_time: int  # ms since the epoch

    def add_action(self, partition_column: str | None) -> AddAction:
        """The file's add action (its path relative to the table root)."""
        return AddAction(
            self.path,
            self.size,
            {partition_column: self.partition_value} if partition_column else {},
            self.modification_time,
            True,
            self.stats,
        )


def _stat_value(value: object, kind: pa.DataType) -> object | None:
    """A footer min/max as Delta statistics JSON spells it (None: leave it out)."""
    if pa.types.is_integer(kind):
        return int(value)  # type: ignore[call-overload]
    if pa.types.is_decimal(kind) and isinstance(value, Decimal):
        as_float = float(value)
        return as_float if Decimal(repr(as_float)) == value else None
    if pa.types.is_date32(kind) and isinstance(value, dt.date):
        return value.isoformat()
    if pa.types.is_timestamp(kind) and isinstance(value, dt.datetime):
        # Delta keeps timestamp bounds in milliseconds, as delta-rs writes them.
        utc = value.astimezone(dt.UTC)
        return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"
    if is_text(kind) and isinstance(value, str):
        return value if len(value) <= _MAX_STAT_CHARS else None
    return None


def _bounds(chunks: list[pq.Statistics], kind: pa.DataType) -> tuple[object, object] | None:
    """A column's [min, max] over its row groups, or None where they cannot be stated:
    statistics are optional in Delta (a reader without them reads the file), and older
    pyarrow releases (18 among them) cannot decode some logical types' (Spark's decimals)."""
    try:
        lowest = _stat_value(min(s.min for s in chunks), kind)
        highest = _stat_value(max(s.max for s in chunks), kind)
    except pa.ArrowNotImplementedError:
        return None
    return None if lowest is None or highest is None else (lowest, highest)


def footer_stats(metadata: pq.FileMetaData, schema: pa.Schema) -> str:
    """Delta statistics (numRecords, minValues, maxValues, nullCount) from a Parquet footer."""
    low: dict[str, object] = {}
    high: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if name not in schema.names:
            continue
        kind = schema.field(name).type
        chunks = [
            metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)
        ]
        if chunks and all(s is not None and s.has_null_count for s in chunks):
            nulls[name] = sum(s.null_count for s in chunks)
        bounded = [s for s in chunks if s is not None and s.has_min_max]
        if bounded and len(bounded) == len(chunks):
            bounds = _bounds(bounded, kind)
            if bounds is not None:
                low[name], high[name] = bounds
    return json.dumps(
        {"numRecords": metadata.num_rows, "minValues": low, "maxValues": high, "nullCount": nulls},
        separators=(",", ":"),
    )


def typed_partition_value(text: str | None, kind: pa.DataType) -> object:
    """A partition value from its folder/log text, as a Python value of the column's type."""
    if text is None:
        return None
    if pa.types.is_date32(kind):
        return dt.date.fromisoformat(text)
    if pa.types.is_integer(kind):
        return int(text)
    raise TypeError(f"partition columns must be dates or integers, got {kind}")


def partition_text(value: object) -> str:
    """A partition value as its folder spells it (dates ISO, integers decimal)."""
    if value is None:
        return NULL_PARTITION
    if isinstance(value, dt.date | int):
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    raise TypeError(f"partition columns must be dates or integers, got {value!r}")


def removes(files: Sequence[DataFile], partition_column: str | None) -> list[RemoveAction]:
    """Remove actions for the given files."""
    now = int(time.time() * 1000)
    return [
        RemoveAction(
            f.path,
            True,
            now,
            f.size,
            {partition_column: None if f.partition_value is None else str(f.partition_value)}
            if partition_column
            else {},
        )
        for f in files
    ]


def require_plain_table(
    table: DeltaTable, partition_column: str | None, schema: pa.Schema | None = None
) -> None:
    """Refuse tables the staged files would not fit: features, constraints, layout, schema.

    Files are read and added as plain Parquet, and raw add actions are not checked against
    constraints, so tables needing more (column mapping, deletion vectors, CHECK
    constraints, generated or identity columns...) belong to a full Delta writer.
    """
    protocol = table.protocol()
    reader = set(protocol.reader_features or []) - _PLAIN_READER_FEATURES
    writer = set(protocol.writer_features or []) - _PLAIN_WRITER_FEATURES
    constraints = [k for k in table.metadata().configuration if k.startswith("delta.constraints.")]
    invariants = [f.name for f in table.schema().fields if "delta.invariants" in f.metadata]
    generated = [
        f.name for f in table.schema().fields if "delta.generationExpression" in f.metadata
    ]
    # Writer version 4 is the change data feed's (handled, see above) or generated columns'.
    legacy = 3 <= protocol.min_writer_version <= 6 and not (
        protocol.min_writer_version == 4 and feeds_changes(table) and not generated
    )
    if (
        protocol.min_reader_version == 2
        or legacy
        or reader
        or writer
        or constraints
        or invariants
        or generated
    ):
        raise ValueError(
            f"{table.table_uri} needs Delta features that staged writes do not apply "
            f"(protocol {protocol.min_reader_version}/{protocol.min_writer_version}, features "
            f"{sorted(reader | writer)}, constraints {constraints}, invariants {invariants}, "
            f"generated columns {generated}); "
            "write it with delta-rs's own writer (a table output) or Delta-Spark"
        )
    partitions = list(table.metadata().partition_columns)
    expected = [partition_column] if partition_column else []
    if partitions != expected:
        raise ValueError(
            f"{table.table_uri} is partitioned by {partitions}, but this write lays files out "
            f"by {expected}; staged writes lay out whole partitions of that column"
        )
    if schema is None:
        return
    # Compared as Delta types, so Arrow spellings (string / large_string) do not matter.
    stored = [(f.name, f.type) for f in table.schema().fields]
    given = [(f.name, f.type) for f in Schema.from_arrow(nullable(schema)).fields]
    if given != stored:
        raise ValueError(
            f"{table.table_uri} has columns {stored} but the rows have {given}; "
            "staged files have the table's schema only (no schema evolution)"
        )


def commit_infos(table: DeltaTable, depth: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(version, commitInfo) of the ``depth`` newest versions up to ``table``'s, newest first.

    Each is read from its own log file. Not ``DeltaTable.history``: delta-rs reads the newest
    log files on storage but numbers them down from the loaded snapshot's version, so a
    commit that lands after the table was loaded shifts every number it reports (and a
    version found by its metadata there can be another commit's).
    """
    fs, base = filesystem(table.table_uri)
    top = table.version()
    for version in range(top, max(top - depth, -1), -1):
        path = f"{base}/_delta_log/{version:020d}.json"
        try:
            text = retrying(functools.partial(_read_text, fs, path), path, table_retries(table))
        except FileNotFoundError:
            return  # older log files are gone (log retention): so is their history
        for line in text.splitlines():
            action = json.loads(line) if line.strip() else {}
            if "commitInfo" in action:
                yield version, action["commitInfo"]
                break


def _read_text(fs: Any, path: str) -> str:
    with fs.open_input_stream(path) as handle:
        return handle.read().decode("utf-8")


def next_version(table: DeltaTable) -> int:
    """The version our commit on ``table``'s snapshot created.

    delta-rs retries are off, so a commit lands exactly one past the snapshot it was
    planned on, or fails; the DeltaTable object itself is not moved forward by it.
    """
    return table.version() + 1


def commit(
    target: LakeTable,
    table: DeltaTable | None,
    adds: Sequence[AddAction],
    properties: CommitProperties,
    *,
    schema: pa.Schema,
    partition_column: str | None,
    removes: Sequence[RemoveAction] = (),
    replace_range: tuple[dt.date, dt.date] | None = None,
) -> int:
    """Commit ``adds`` (and ``removes``) in one Delta transaction; the version it made.

    With no table yet, the transaction creates it (``mode="error"``: a racer that created
    it first makes this one fail, and the caller decides again). ``replace_range``
    ``(start, end)`` also removes every file of the partitions ``[start, end)`` (a range
    overwrite). delta-rs's own retries are off, so a concurrent commit makes it fail.
    """
    partition_by = [partition_column] if partition_column else None
    if table is None:
        return create_table(
            target,
            nullable(schema).empty_table(),
            properties,
            partition_by=partition_by or (),
            files=adds,
        )
    mode: Literal["append", "overwrite"] = "append"
    filters = None
    if replace_range is not None:
        if partition_column is None:
            raise ValueError("a range overwrite needs files laid out by a partition column")
        start, end = replace_range
        mode = "overwrite"
        filters = [
            (partition_column, ">=", start.isoformat()),
            (partition_column, "<", end.isoformat()),
        ]
    table.create_write_transaction(
        [*adds, *removes],
        mode=mode,
        schema=table_schema(table),
        partition_by=partition_by,
        partition_filters=filters,
        commit_properties=properties,
    )
    return next_version(table)
