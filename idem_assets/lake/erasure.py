"""Erasure: a key's rows removed from a table in one commit, and kept out of every write.

Deleting a person's rows is not enough where tables are recomputed from landing files: a
rerun or backfill of an old day reads the files again and brings the rows back. So an
erased key is also a filter (``Erased``) that every later write applies to its rows, on
every engine. What still holds the key on storage is found by ``files_holding``: every
data file under the table's folder (its current files, files earlier commits removed that
vacuum has not deleted yet, change-data files, files no commit ever added), decided by the
Delta log's statistics or the file's own Parquet statistics where those exclude the value,
and by reading the key columns where they cannot.

Values are compared as text (``42`` matches an integer 42 and a string "42"): the key
arrives from a command line, and one spelling must reach every table that holds it. The
delete is a MERGE whose source table carries the value; no predicate is built from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote

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
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pafs = lazy_module("pyarrow.fs")
    pq = lazy_module("pyarrow.parquet")

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


CURRENT, REMOVED, CHANGE_DATA, UNLOGGED = "current", "removed", "change data", "not in the log"
_LOG_FOLDER, _CHANGE_FOLDER = "_delta_log", "_change_data"
# Delta writers may cut string statistics short: a bound this long does not decide.
_SHORTEST_CUT = 32


@dataclass(frozen=True)
class HeldFile:
    """A data file on storage holding erased keys."""

    path: str  # relative to the table's folder
    kind: str  # CURRENT, REMOVED (by a commit, not yet vacuumed), CHANGE_DATA or UNLOGGED
    keys: tuple[str, ...]  # the erased keys it holds, by digest


@dataclass(frozen=True)
class FileScan:
    """What ``files_holding`` found in one table's folder, and how it decided."""

    uri: str
    held: tuple[HeldFile, ...]
    files: int  # data files on storage
    by_statistics: int  # decided without reading rows (the log's or the file's statistics)
    read: int  # files whose key columns were read


class HeldIn(Protocol):
    """What one data file holds, for ``scan_folder``."""

    def __call__(
        self,
        fs: pafs.FileSystem,
        path: str,
        relative: str,
        logged: Mapping[str, tuple[object, object]] | None,
    ) -> tuple[set[str], str]:
        """The digests of the erased keys the file at ``path`` (``relative`` to the table's
        folder; ``logged``: its add action's (min, max) per column when it is current)
        holds, and how that was decided: "statistics" (no row read) or "read"."""
        ...


def files_holding(target: LakeTable, erased: Erased) -> FileScan:
    """Every data file under ``target``'s folder that holds a key of ``erased``, whatever
    version (if any) refers to it; statistics rule a file out where they can, the key
    columns are read where they cannot."""
    if not erased:
        return FileScan(target.uri, (), 0, 0, 0)
    return scan_folder(
        target, lambda fs, path, relative, logged: _keys_in(fs, path, relative, erased, logged)
    )


def scan_folder(target: LakeTable, held_in: HeldIn) -> FileScan:
    """Every data file under ``target``'s folder (current, removed by a commit, change data,
    added by no commit) with the erased keys ``held_in`` finds in it."""
    table = target.open()
    if table is None:
        return FileScan(target.uri, (), 0, 0, 0)
    fs, base = filesystem(table.table_uri)
    base = base.rstrip("/")
    current = _current_statistics(table)
    added = _ever_added(fs, base)
    held, counted, decided, read = [], 0, 0, 0
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        relative = info.path[len(base) + 1 :]
        if (
            info.type != pafs.FileType.File
            or not relative.endswith(".parquet")
            or relative.split("/")[0] == _LOG_FOLDER
        ):
            continue
        counted += 1
        keys, how = held_in(fs, info.path, relative, current.get(relative))
        decided += how == "statistics"
        read += how == "read"
        if keys:
            held.append(HeldFile(relative, _kind(relative, current, added), tuple(sorted(keys))))
    return FileScan(target.uri, tuple(held), counted, decided, read)


def _kind(relative: str, current: Mapping[str, object], added: set[str]) -> str:
    if relative in current:
        return CURRENT
    if relative.split("/")[0] == _CHANGE_FOLDER:
        return CHANGE_DATA
    return REMOVED if relative in added else UNLOGGED


def _current_statistics(table: DeltaTable) -> dict[str, dict[str, tuple[object, object]]]:
    """Path -> column -> (min, max) of each current file, as its add action states them."""
    actions = pa.table(table.get_add_actions(flatten=True))
    columns = [
        name[len("min.") :]
        for name in actions.column_names
        if name.startswith("min.") and f"max.{name[len('min.') :]}" in actions.column_names
    ]
    out: dict[str, dict[str, tuple[object, object]]] = {}
    for row in actions.to_pylist():
        path = unquote(row["path"])
        out[path] = {c: (row[f"min.{c}"], row[f"max.{c}"]) for c in columns}
    return out


def _ever_added(fs: pafs.FileSystem, base: str) -> set[str]:
    """Every data file a commit in the log on storage added (paths relative to the table)."""
    added: set[str] = set()
    selector = pafs.FileSelector(f"{base}/{_LOG_FOLDER}", allow_not_found=True)
    for info in fs.get_file_info(selector):
        if not info.path.endswith(".json"):
            continue
        with fs.open_input_stream(info.path) as handle:
            for line in handle.read().decode("utf-8").splitlines():
                path = (json.loads(line).get("add") or {}).get("path") if line.strip() else None
                if path:
                    added.add(unquote(path))
    return added


def _keys_in(
    fs: pafs.FileSystem,
    path: str,
    relative: str,
    erased: Erased,
    logged: Mapping[str, tuple[object, object]] | None,
) -> tuple[set[str], str]:
    """The digests of the erased keys the file holds, and how that was decided."""
    with fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        names = set(parquet.schema_arrow.names)
        found = _in_folder_names(relative, erased)
        wanted = {
            column: {v for v in values if not _ruled_out(parquet, column, v, logged)}
            for column, values in erased.values.items()
            if column in names
        }
        wanted = {column: values for column, values in wanted.items() if values}
        if not wanted:
            return found, "statistics"
        rows = parquet.read(columns=sorted(wanted))
    for column, values in wanted.items():
        held = Erased({column: frozenset(values)}).held(rows)
        texts = pc.cast(rows.column(column), pa.string()).filter(held).to_pylist()
        found |= {key_digest(column, text) for text in set(texts)}
    return found, "read"


def _in_folder_names(relative: str, erased: Erased) -> set[str]:
    """Keys named by the file's partition folders (``column=value``): the folder holds them."""
    found = set()
    for part in relative.split("/")[:-1]:
        column, _, value = part.partition("=")
        if unquote(value) in erased.values.get(column, ()):
            found.add(key_digest(column, unquote(value)))
    return found


def _ruled_out(
    parquet: pq.ParquetFile,
    column: str,
    value: str,
    logged: Mapping[str, tuple[object, object]] | None,
) -> bool:
    """Whether statistics prove no row of the file holds ``value`` in ``column``: the add
    action's bounds when the file is current, else the bounds of every row group."""
    kind = parquet.schema_arrow.field(column).type
    typed = _typed(value, kind)
    if typed is _UNDECIDED:
        return False
    if typed is None:
        return True  # a value this column's type never prints as
    if logged is not None and column in logged and None not in logged[column]:
        return not _within(typed, *logged[column])
    metadata = parquet.metadata
    index = parquet.schema_arrow.get_field_index(column)
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            return False
        if stats.null_count == metadata.row_group(group).num_rows:
            continue
        if _within(typed, stats.min, stats.max):
            return False
    return True


_UNDECIDED = object()


def _typed(value: str, kind: pa.DataType) -> object:
    """``value`` in the column's type when statistics of that type can decide it; None when
    no value of the type prints as ``value`` (the text comparison could never match)."""
    if pa.types.is_integer(kind):
        try:
            number = int(value)
        except ValueError:
            return None
        return number if str(number) == value else None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return value
    return _UNDECIDED


def _within(value: object, low: object, high: object) -> bool:
    if isinstance(value, str):
        if not isinstance(low, str) or not isinstance(high, str):
            return True
        if len(low) >= _SHORTEST_CUT or len(high) >= _SHORTEST_CUT:
            return True  # possibly cut short: not a bound
    try:
        return bool(low <= value <= high)  # type: ignore[operator]
    except TypeError:
        return True


# A file no commit added is left alone this long: it may be a write's, committing now.
UNLOGGED_GRACE_SECONDS = 3600


@dataclass(frozen=True)
class ErasureVacuum:
    """What ``vacuum_erased`` deleted from one table's folder, and what it left."""

    uri: str
    vacuumed: tuple[str, ...]  # every file earlier commits removed (Delta's vacuum)
    deleted: tuple[str, ...]  # change-data and unlogged files holding an erased key
    left: tuple[HeldFile, ...]  # current files (erase again), or unlogged ones too young


def vacuum_erased(
    target: LakeTable, scan: FileScan, now: float, grace_seconds: float = UNLOGGED_GRACE_SECONDS
) -> ErasureVacuum:
    """Delete now what holds an erased key in ``target``'s folder, overriding the retention:
    Delta's vacuum with no retention (every file removed by a commit goes, so time travel
    to earlier versions and readers still on one of them fail), then each change-data file
    holding a key (its versions' changes can no longer be read) and each file no commit
    added that is older than ``grace_seconds``. Current files are never touched."""
    kinds = {f.kind for f in scan.held}
    table = target.open()
    vacuumed: list[str] = []
    if table is not None and REMOVED in kinds:
        vacuumed = table.vacuum(
            retention_hours=0,
            dry_run=False,
            enforce_retention_duration=False,
            full=False,
            commit_properties=commit_properties({"idem.maintenance": "erasure vacuum"}),
        )
    fs, base = filesystem(target.uri)
    deleted, left = [], []
    for held in scan.held:
        path = f"{base.rstrip('/')}/{held.path}"
        if held.kind == CURRENT or (held.kind == UNLOGGED and _age(fs, path, now) < grace_seconds):
            left.append(held)
        elif fs.get_file_info(path).type == pafs.FileType.File:
            # change data; unlogged; a removed file the log no longer lists as removed
            fs.delete_file(path)
            deleted.append(held.path)
    return ErasureVacuum(target.uri, tuple(sorted(vacuumed)), tuple(deleted), tuple(left))


def _age(fs: pafs.FileSystem, path: str, now: float) -> float:
    modified = fs.get_file_info(path).mtime
    return float("inf") if modified is None else now - modified.timestamp()
