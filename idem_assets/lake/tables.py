"""Opening and reading Delta tables, and retrying commits that lost a race."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from deltalake import (
    CommitProperties,
    DeltaTable,
    Schema,
    Transaction,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions

from idem_assets._lazy import lazy_module
from idem_assets.lake.predicates import Condition, In, OneOf, conjunction
from idem_assets.transient import Budget, Retries, retrying

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


T = TypeVar("T")
StorageOptions = Mapping[str, str] | None

# Conflicts delta-rs reports as generic DeltaError; matched on its wording.
_CONFLICT_MARKERS = (
    "commit failed",
    "concurrent",
    "conflict",
    "version already exists",
    "already exists",
)


@dataclass(frozen=True)
class LakeTable:
    """Where a Delta table lives and how to reach it."""

    uri: str
    # Credentials may live here: never in a repr, a log line or an error message.
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def open(self, version: int | None = None) -> DeltaTable | None:
        """The table at its newest (or the given) version, or None if it does not exist.

        A load whose answer is cut mid-body is read again (``idem_assets.transient``).
        """

        def load() -> DeltaTable | None:
            try:
                return DeltaTable(self.uri, version=version, storage_options=self._options())
            except TableNotFoundError:
                return None

        return retrying(load, self.uri, self.retries())

    def exists(self) -> bool:
        """Whether a Delta log exists at the uri."""
        return retrying(
            lambda: DeltaTable.is_deltatable(self.uri, storage_options=self._options()),
            self.uri,
            self.retries(),
        )

    def retries(self) -> Retries:
        """How reads of this table retry a cut answer (its storage options' retry settings)."""
        return Retries.from_options(self.storage_options)

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def options(self) -> dict[str, str] | None:
        """Storage options in the form delta-rs calls take."""
        return self._options()


# Reading goes through delta-rs's own engine (``DeltaTable.scan``), not a pyarrow dataset
# over delta-rs's filesystem handler: processes that used the latter abort at exit now
# and then ("terminate called without an active exception", exit code 134), which a
# Dagster step process must never do after reporting success.
_KEY_CHUNK_ROWS = 1_000_000


def read_rows(
    table: DeltaTable | None,
    schema: pa.Schema | None = None,
    ranges: Sequence[Condition] = (),
    columns: Sequence[str] | None = None,
    keys: tuple[str, pa.Array] | None = None,
) -> pa.Table:
    """Rows of ``table`` within all ``ranges`` (empty table of ``schema`` if none).

    ``ranges`` become the scan predicate, so partitions and files whose statistics
    cannot match are skipped. ``keys`` (column, values) keeps only rows whose column
    value is among ``values``; it is applied while streaming, in bounded chunks.
    """
    if table is None:
        if schema is None:
            raise ValueError("reading a missing table needs the expected schema")
        wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        return wanted.empty_table()
    stored = table_schema(table)
    wanted = stored if columns is None else pa.schema([stored.field(c) for c in columns])

    def scan() -> pa.Table:
        reader = table.scan(
            columns=list(columns) if columns else None,
            predicate=conjunction(tuple(ranges)) or None,
        )
        batches = _matching(reader, keys) if keys is not None else _batches(reader)
        # The engine hands out string views; give callers the table's declared types.
        return pa.Table.from_batches([b.cast(wanted) for b in batches], schema=wanted)

    return retrying(scan, table.table_uri, table_retries(table))


def rows_of_keys(
    table: DeltaTable | None,
    keys: pl.DataFrame,
    schema: pa.Schema,
    ranges: Sequence[Condition] = (),
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The rows of ``table`` whose key columns (the columns of ``keys``) are a row of
    ``keys``, read from the files that may hold ``ranges`` (only ``columns``, the key's among
    them, when given); one key column is matched while streaming (``read_rows``), several
    after."""
    if table is None:
        return schema.empty_table()
    key = keys.columns
    if len(key) == 1:
        return read_rows(
            table,
            ranges=ranges,
            columns=columns,
            keys=(key[0], keys.get_column(key[0]).to_arrow()),
        )
    import polars as pl  # here, not at import: see idem_assets._lazy

    stored = pl.from_arrow(read_rows(table, ranges=ranges, columns=columns))
    assert isinstance(stored, pl.DataFrame)
    return stored.join(keys, on=key, how="semi").to_arrow()


def table_retries(table: DeltaTable) -> Retries:
    """The retry settings of the storage options ``table`` was opened with."""
    return Retries.from_options(getattr(table, "_storage_options", None))


def _batches(reader: Any) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        yield pa.record_batch(batch)


def _matching(reader: Any, keys: tuple[str, pa.Array]) -> Iterator[pa.RecordBatch]:
    import polars as pl  # here, not at import: see idem_assets._lazy

    column, values = keys
    wanted = pl.DataFrame({column: pl.from_arrow(values)}).unique()
    pending: list[pa.RecordBatch] = []
    rows = 0

    def flush() -> Iterator[pa.RecordBatch]:
        if not pending:
            return
        chunk = pl.from_arrow(pa.Table.from_batches(pending))
        assert isinstance(chunk, pl.DataFrame)
        kept = chunk.join(wanted.cast({column: chunk.schema[column]}), on=column, how="semi")
        yield from kept.to_arrow().to_batches()

    for batch in _batches(reader):
        pending.append(batch)
        rows += batch.num_rows
        if rows >= _KEY_CHUNK_ROWS:
            yield from flush()
            pending, rows = [], 0
    yield from flush()


@dataclass(frozen=True)
class WriteOptions:
    """How files are written and tables created, beyond what is written."""

    # Delta table configuration set when a write creates the table.
    table_config: Mapping[str, str] | None = None
    # Parquet writer properties (delta-rs ``WriterProperties`` keyword arguments).
    writer_properties: Mapping[str, Any] | None = None
    # Accept an output whose columns differ from the table's (replace: the output's schema
    # wins; partition overwrite: new columns are added).
    evolve_schema: bool = False
    # Columns naming a row, for a table keeping a change feed: a row of the same key with
    # other values is an update there (pre- and post-image), not a delete and an insert.
    change_key: tuple[str, ...] = ()

    def writer(self) -> WriterProperties | None:
        """The delta-rs writer properties, if any were given."""
        return WriterProperties(**dict(self.writer_properties)) if self.writer_properties else None

    def configuration(self) -> dict[str, str] | None:
        """Table configuration for a table-creating write."""
        return dict(self.table_config) if self.table_config else None


DEFAULT_OPTIONS = WriteOptions()


def create_table(
    target: LakeTable,
    rows: pa.Table,
    properties: CommitProperties,
    options: WriteOptions = DEFAULT_OPTIONS,
    partition_by: Sequence[str] = (),
    *,
    files: Sequence[AddAction] | None = None,
) -> int:
    """Create ``target`` holding ``rows`` (or the data ``files`` already written for it,
    with ``rows``'s schema) as its version 0, or lose the race.

    Every table this package makes is made here. delta-rs's ``mode="error"`` fails when
    another writer created the table first; with ``properties``' own retries off
    (``commit_properties``) the loser gets a conflict, and ``with_commit_retries`` re-reads
    the table and decides again on what is there, instead of clobbering it or appending
    a second copy.
    """
    columns = list(partition_by) or None
    if files is not None:
        create_table_with_add_actions(
            target.uri,
            Schema.from_arrow(rows.schema),
            list(files),
            mode="error",
            partition_by=columns,
            storage_options=target.options(),
            configuration=options.configuration(),
            commit_properties=properties,
        )
        return 0
    write_deltalake(
        target.uri,
        rows,
        mode="error",
        partition_by=columns,
        storage_options=target.options(),
        configuration=options.configuration(),
        writer_properties=options.writer(),
        commit_properties=properties,
    )
    return 0


class SchemaMismatchError(ValueError):
    """Data whose columns are not the table's; the message names them and the way out."""


def check_columns(
    rows: pa.Table, table: DeltaTable, options: WriteOptions, *, exact: bool = False
) -> None:
    """Refuse columns the table lacks (and, ``exact``, lacking the table's), unless the
    schema may evolve: a column is never dropped or added silently."""
    if options.evolve_schema:
        return
    stored = set(table_schema(table).names)
    extra = [name for name in rows.column_names if name not in stored]
    missing = sorted(stored - set(rows.column_names)) if exact else []
    if extra or missing:
        problems = (
            [f"column(s) {', '.join(extra)} that the table does not have"] if extra else []
        ) + ([f"no column(s) {', '.join(missing)}"] if missing else [])
        raise SchemaMismatchError(
            f"the output has {' and '.join(problems)} (table columns: "
            f"{', '.join(sorted(stored))}); nothing was written. Set overwrite_schema=True "
            "(IO manager) to change the table's columns, or match them in the output"
        )


def is_conflict(error: BaseException) -> bool:
    """Whether a delta-rs error means another writer committed first."""
    if isinstance(error, CommitFailedError):
        return True
    if isinstance(error, DeltaError):
        text = str(error).lower()
        return any(marker in text for marker in _CONFLICT_MARKERS)
    return False


def with_commit_retries(
    attempt: Callable[[int], T], retries: int = 8, transient: Retries | None = None
) -> T:
    """Run ``attempt`` again (re-reading state) when a concurrent commit beat it, or when
    an answer from storage was cut mid-body (within ``transient``'s budget).

    Each attempt must start from a fresh snapshot; losers re-evaluate and usually
    find the winner already wrote the same content, so they commit nothing. The same
    holds after a cut answer: whether or not a commit landed before it, the next attempt
    decides from the log (content there: nothing to commit).
    """
    cuts = Budget("a Delta write", transient, time.monotonic)
    conflicts = 0
    for number in itertools.count():
        try:
            return attempt(number)
        except Exception as error:
            if is_conflict(error):
                if conflicts == retries:
                    raise
                time.sleep(min(2.0, 0.05 * 2**conflicts) * (0.5 + random.random()))
                conflicts += 1
                continue
            delay = cuts.wait(error)
            if delay is None:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


def table_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema as a pyarrow schema."""
    return pa.schema(table.schema().to_arrow())


def commit_properties(
    metadata: Mapping[str, Any], app_transactions: Sequence[Transaction] = ()
) -> CommitProperties:
    """Commit properties for every write here: our metadata and no silent rebasing.

    delta-rs retries a commit that lost a race by rebasing it onto the newer
    version; for a table-creating write (mode="error") that turns the loser into
    a plain append, duplicating the data. With internal retries off, the loser
    gets a conflict and ``with_commit_retries`` re-reads the table and decides
    again (usually: content already there, nothing to commit).
    """
    return CommitProperties(
        custom_metadata={k: str(v) for k, v in metadata.items()},
        max_commit_retries=0,
        app_transactions=list(app_transactions) or None,
    )


def slice_signature(table: DeltaTable | None, conditions: Sequence[Condition] = ()) -> str:
    """Digest of the data files that may hold rows matching ``conditions`` (metadata only).

    Delta data files are immutable and uniquely named, so if this digest is unchanged
    since a write, nothing has touched that slice of the table since. A file is in the
    slice when its partition values, or else its min/max statistics, can match.
    """
    return FileIndex(table).signature(conditions)


class FileIndex:
    """A table version's data files, read once from its log, to sign many slices.

    Signing each day of a 2,406-day range reads the file list once, not once per day.
    """

    def __init__(self, table: DeltaTable | None) -> None:
        self._actions = None if table is None else pa.table(table.get_add_actions(flatten=True))

    def signature(self, conditions: Sequence[Condition] = ()) -> str:
        """``slice_signature`` of the slice ``conditions`` select."""
        actions = self._actions
        if actions is None:
            return "absent"
        keep = pa.array(np.ones(actions.num_rows, dtype=bool))
        for condition in conditions:
            keep = pc.and_(keep, _may_match(actions, condition))
        paths = sorted(pc.filter(actions.column("path"), keep).to_pylist())
        digest = hashlib.sha256()
        for path in paths:
            digest.update(path.encode())
            digest.update(b"\n")
        return f"{len(paths)}:{digest.hexdigest()[:32]}"


def _may_match(actions: pa.Table, condition: Condition) -> pa.ChunkedArray:
    """Per data file: whether rows matching ``condition`` may be in it (unknown = yes)."""
    name = condition.column
    if f"partition.{name}" in actions.column_names:
        low = high = actions.column(f"partition.{name}")
    elif f"min.{name}" in actions.column_names:
        low, high = actions.column(f"min.{name}"), actions.column(f"max.{name}")
    else:
        return pa.chunked_array([np.ones(actions.num_rows, dtype=bool)])
    if isinstance(condition, OneOf):
        value = pa.scalar(condition.value)
        may = pc.and_(pc.less_equal(low, value), pc.greater_equal(high, value))
    elif isinstance(condition, In):
        may = pa.chunked_array([np.zeros(actions.num_rows, dtype=bool)])
        for item in condition.values:
            value = pa.scalar(item, type=low.type)
            may = pc.or_(may, pc.and_(pc.less_equal(low, value), pc.greater_equal(high, value)))
    else:
        below_end = pc.less_equal if condition.inclusive else pc.less
        start, end = condition.bounds(low.type)
        may = pc.and_(pc.greater_equal(high, start), below_end(low, end))
    return pc.fill_null(may, True)
