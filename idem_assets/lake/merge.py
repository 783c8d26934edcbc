"""MERGE upsert on natural keys that rewrites only rows whose content changed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalake import CommitProperties, DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.faults import crash_point
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.dedupe import DELETE_FLAG, DedupeResult, dedupe_newest, survivors
from idem_assets.lake.frames import FrameLike, conform, to_arrow, to_polars
from idem_assets.lake.predicates import Range, all_of, quote_identifier
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import LakeTable, create_table, read_rows, rows_of_keys, table_schema

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pl = lazy_module("polars")


STRATEGY = "merge"
_TIE = "__idem_tie"
_SIDE = "__idem_side"
_STORED_VERSION = "__idem_stored_version"
_SOURCE, _TARGET = "s", "t"


@dataclass(frozen=True)
class MergePlan:
    """Which batch rows a merge would write, decided against the table as it is now."""

    batch: pa.Table
    # Batch rows that are new or beat the stored row, plus the tie flag column.
    winners: pl.DataFrame
    inserts: int
    updates: int
    # Rows the table holds for the batch's keys (within the pruning ranges).
    current: pa.Table

    @property
    def changes(self) -> int:
        """Rows a merge would insert or update; 0 means a rerun is a no-op."""
        return self.inserts + self.updates


def pruning_ranges(batch: pa.Table, columns: Sequence[str]) -> list[Range]:
    """Literal ``[min, max]`` ranges of ``columns`` over the batch, for file pruning."""
    ranges = []
    for name in columns:
        bounds = pc.min_max(batch.column(name))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and high is not None:
            ranges.append(Range(name, low, high, inclusive=True))
    return ranges


def plan_merge(
    table: DeltaTable | None,
    batch: pa.Table,
    key: Sequence[str],
    version_column: str | None,
    prune_columns: Sequence[str] = (),
) -> MergePlan:
    """Compare a deduplicated batch with the stored rows of its keys."""
    key = list(key)
    ranges = pruning_ranges(batch, prune_columns)
    keys = None
    if len(key) == 1 and batch.num_rows:
        keys = (key[0], batch.column(key[0]).combine_chunks())
    current = read_rows(table, batch.schema, ranges=ranges, keys=keys)
    current = current.select(batch.column_names) if current.num_rows else batch.schema.empty_table()
    stored = to_polars(conform(current, batch.schema)).with_columns(pl.lit(0).alias(_SIDE))
    incoming = to_polars(batch).with_columns(pl.lit(1).alias(_SIDE))
    if version_column:
        # The batch row wins where it survives the same dedupe over (stored ∪ batch);
        # an identical stored row sorts first (side 0), so unchanged rows are not sent.
        kept = survivors(pl.concat([stored, incoming]), key, version_column, then_by=[_SIDE])
        winners = kept.filter(pl.col(_SIDE) == 1).drop(_SIDE)
    else:
        # Without a version the batch is the truth: every row that differs is sent.
        winners = incoming.drop(_SIDE).join(
            stored.drop(_SIDE), on=batch.column_names, how="anti", nulls_equal=True
        )
    versions = [version_column] if version_column else []
    known = (
        stored.select([*key, *versions])
        .rename({v: _STORED_VERSION for v in versions})
        .with_columns(pl.lit(True).alias("__update"))
    )
    joined = winners.join(known, on=key, how="left", nulls_equal=False)
    # A tie (same version, other content) needs the guard's help at MERGE time.
    tie = (pl.col(version_column) == pl.col(_STORED_VERSION)) if version_column else pl.lit(False)
    decided = joined.with_columns(
        pl.col("__update").fill_null(False), tie.fill_null(False).alias(_TIE)
    )
    updates = int(decided["__update"].sum())
    return MergePlan(
        batch=batch,
        winners=decided.select([*batch.column_names, _TIE]),
        inserts=decided.height - updates,
        updates=updates,
        current=current,
    )


def merge_upsert(
    target: LakeTable,
    data: FrameLike | DedupeResult,
    key: Sequence[str],
    *,
    version_column: str | None = None,
    partition_column: str | None = None,
    prune_columns: Sequence[str] = (),
    schema: pa.Schema | None = None,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Upsert ``data`` into the table on ``key``; newest ``version_column`` wins.

    The batch is deduplicated first (several source rows for one key are an
    error in MERGE). Rows equal to what is stored, or older than it, are not
    sent at all, so a rerun commits nothing. The MERGE predicate carries the
    batch's literal ``[min, max]`` of ``prune_columns`` so untouched files are
    skipped, and its update guard re-checks versions in case the table moved
    between planning and commit. ``commit.options``: the table configuration of a
    table-creating write.

    ``data`` may be a ``dedupe_newest`` result: a caller that already deduplicated (the
    IO manager) passes it, and its rows are merged as they are.
    """
    if isinstance(data, DedupeResult):
        deduped = data
    else:
        rows = to_arrow(data)
        if schema is not None:
            rows = conform(rows, schema)
        deduped = dedupe_newest(rows, key, version_column, sort_by=prune_columns)
    batch = deduped.rows
    batch_fp = commit.fingerprint_of(batch)
    extra = {
        "duplicates_dropped": deduped.duplicates_dropped,
        "conflicting_keys": deduped.conflicting_keys,
    }
    properties = commit.properties({"idem.fingerprint": str(batch_fp)})

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if table is None:
            create_table(
                target,
                batch,
                properties,
                commit.options,
                [partition_column] if partition_column else (),
            )
            return attempt.inserted(0, batch.num_rows, batch_fp, details=extra)
        plan = plan_merge(table, batch, key, version_column, prune_columns)
        if plan.changes == 0:
            return attempt.unchanged(batch_fp, proof=Proof.CONTENT, details=extra)
        crash_point(f"lake.merge_planned/{target.uri.rsplit('/', 1)[-1]}")
        metrics = _execute(table, plan, key, version_column, prune_columns, properties)
        return attempt.written(
            table.version(),
            plan.changes,
            batch_fp,
            rows_inserted=int(metrics.get("num_target_rows_inserted", plan.inserts)),
            rows_updated=int(metrics.get("num_target_rows_updated", plan.updates)),
            details={
                **extra,
                "files_scanned": metrics.get("num_target_files_scanned"),
                "files_skipped": metrics.get("num_target_files_skipped_during_scan"),
            },
        )

    return commit_retried(target, STRATEGY, once)


def _execute(
    table: DeltaTable,
    plan: MergePlan,
    key: Sequence[str],
    version_column: str | None,
    prune_columns: Sequence[str],
    properties: CommitProperties,
) -> dict[str, Any]:
    source = plan.winners.to_arrow()
    columns = table_schema(table).names
    source = pa.Table.from_arrays(
        [conform(source.select(columns), table_schema(table)).column(c) for c in columns]
        + [source.column(_TIE)],
        names=[*columns, _TIE],
    )
    on = _same_keys(key, pruning_ranges(plan.batch, prune_columns))
    guard = _source_wins(version_column) if version_column else None
    assignments = {quote_identifier(c): quote_identifier(c, _SOURCE) for c in columns}
    return (
        table.merge(
            source,
            predicate=on,
            source_alias=_SOURCE,
            target_alias=_TARGET,
            commit_properties=properties,
        )
        .when_matched_update(updates=assignments, predicate=guard)
        .when_not_matched_insert(updates=assignments)
        .execute()
    )


# --- Deletes ordered like updates --------------------------------------------------------
_DELETE = DELETE_FLAG
# The tombstones of a table are kept in a Delta table at its location plus this.
TOMBSTONES_SUFFIX = "__tombstones"


def tombstones_of(
    batch: pa.Table,
    key: Sequence[str],
    version_column: str,
    delete_column: tuple[str, object],
    kept: pa.Table | None = None,
) -> pa.Table:
    """Key -> the version of its newest delete, over the batch's deletes and ``kept``."""
    column, marker = delete_column
    deletes = batch.filter(pc.equal(batch.column(column), pa.scalar(marker)))
    frame = to_polars(deletes.select([*key, version_column]))
    if kept is not None and kept.num_rows:
        frame = pl.concat(
            [frame, to_polars(kept.select([*key, version_column]))], how="vertical_relaxed"
        )
    return frame.group_by(list(key)).agg(pl.col(version_column).max()).sort(list(key)).to_arrow()


def newest_events(
    batch: pa.Table,
    key: Sequence[str],
    version_column: str,
    delete_column: tuple[str, object],
    tombstones: pa.Table,
) -> pl.DataFrame:
    """One event per key, by ``survivor_order`` (a delete wins a tie); tombstones take part
    as deletes. ``_DELETE`` says which kind won."""
    column, marker = delete_column
    events = to_polars(batch).with_columns((pl.col(column) == marker).alias(_DELETE)).drop(column)
    if tombstones.num_rows:
        stones = to_polars(tombstones).with_columns(pl.lit(True).alias(_DELETE))
        events = pl.concat([events, stones], how="diagonal_relaxed")
    return survivors(events, key, version_column)


@dataclass(frozen=True)
class ChangePlan:
    """What a MERGE of upserts and deletes would do, decided against the table as it is."""

    upserts: MergePlan  # the upserts that win, planned like merge_upsert's
    deletes: pl.DataFrame  # key and version of each stored row a delete removes

    @property
    def changes(self) -> int:
        """Rows inserted, updated or deleted; 0 means a rerun is a no-op."""
        return self.upserts.changes + self.deletes.height


def plan_changes(
    table: DeltaTable | None,
    rows: pa.Table,
    key: Sequence[str],
    version_column: str,
    delete_column: tuple[str, object],
    tombstones: pa.Table,
    prune_columns: Sequence[str] = (),
) -> ChangePlan:
    """The newest event per key of ``rows`` and the ``tombstones`` of its keys, against
    ``table``: the upserts that beat the stored rows, and the stored rows deleted. Only the
    files within the batch's ``[min, max]`` of ``prune_columns`` are read."""
    key = list(key)
    batch_keys = to_polars(rows.select(key)).unique()
    relevant = to_polars(tombstones).join(batch_keys, on=key, how="semi").to_arrow()
    events = newest_events(rows, key, version_column, delete_column, relevant)
    columns = [c for c in rows.column_names if c != delete_column[0]]
    upserts = conform(
        events.filter(~pl.col(_DELETE)).select(columns).to_arrow(), rows.select(columns).schema
    )
    deletes = events.filter(pl.col(_DELETE)).select([*key, version_column])
    plan = plan_merge(table, upserts, key, version_column, prune_columns)
    if table is None:
        return ChangePlan(plan, deletes.clear())
    if deletes.is_empty():
        return ChangePlan(plan, deletes)
    # Only the deleted keys' stored versions are read (one key column: while streaming).
    found = rows_of_keys(
        table,
        deletes.select(key),
        table_schema(table),
        pruning_ranges(rows, prune_columns),
        columns=[*key, version_column],
    )
    stored = to_polars(found).rename({version_column: _STORED_VERSION})
    doomed = deletes.join(stored, on=key, how="inner").filter(
        pl.col(version_column) >= pl.col(_STORED_VERSION)
    )
    return ChangePlan(plan, doomed.select([*key, version_column]))


def merge_changes(
    target: LakeTable,
    data: FrameLike,
    key: Sequence[str],
    *,
    version_column: str,
    delete_column: tuple[str, object],
    tombstones: pa.Table | Callable[[], pa.Table | None] | None = None,
    prune_columns: Sequence[str] = (),
    commit: Commit = DEFAULT_COMMIT,
) -> tuple[WriteResult, pa.Table]:
    """Upserts and deletes of ``data`` in one MERGE, ordered by ``version_column``; the
    result and the tombstones to keep for the next load (``tombstones`` ∪ this batch's).

    ``tombstones`` may be a function: it is called again in every attempt, after the
    table is opened, so a writer that lost a race sees the deletes the winner stored
    before committing: a delete committed after the table was opened fails this attempt's
    commit (it is decided again on the newer table), and one committed before it had its
    tombstone stored first, so it is read here. ``commit.options``: the table configuration
    of a table-creating write.
    """
    key = list(key)
    rows = to_arrow(data)
    content = commit.fingerprint_of(rows)
    properties = commit.properties({"idem.fingerprint": str(content)})
    found: list[pa.Table] = []

    def table_then_tombstones() -> DeltaTable | None:
        # What each try plans on: the table, then the tombstones (kept in ``found`` for the
        # caller to store). Read the other way round, a delete committed between the two
        # reads would leave its key absent from the table and from the tombstones read,
        # and an older upsert of it would be inserted on top of that newer table.
        table = target.open()
        known = tombstones() if callable(tombstones) else tombstones
        found[:] = [tombstones_of(rows, key, version_column, delete_column, known)]
        return table

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        changes = plan_changes(
            table, rows, key, version_column, delete_column, found[0], prune_columns
        )
        plan, doomed = changes.upserts, changes.deletes
        if table is None:
            create_table(target, changes.upserts.batch, properties, commit.options)
            return attempt.inserted(0, plan.batch.num_rows, content)
        if plan.changes == 0 and doomed.height == 0:
            return attempt.unchanged(content, proof=Proof.CONTENT)
        schema = table_schema(table)
        names = schema.names
        winners = plan.winners.with_columns(pl.lit(False).alias(_DELETE))
        gone = doomed.select([*key, version_column]).with_columns(
            pl.lit(False).alias(_TIE), pl.lit(True).alias(_DELETE)
        )
        source = pl.concat([winners, gone], how="diagonal_relaxed").to_arrow()
        source = pa.Table.from_arrays(
            [conform(source.select(names), schema).column(c) for c in names]
            + [source.column(_TIE), source.column(_DELETE)],
            names=[*names, _TIE, _DELETE],
        )
        on = _same_keys(key, pruning_ranges(rows, prune_columns))
        v_s = quote_identifier(version_column, _SOURCE)
        v_t = quote_identifier(version_column, _TARGET)
        flag = quote_identifier(_DELETE, _SOURCE)
        guard = _source_wins(version_column)
        assignments = {quote_identifier(c): quote_identifier(c, _SOURCE) for c in names}
        metrics = (
            table.merge(
                source,
                predicate=on,
                source_alias=_SOURCE,
                target_alias=_TARGET,
                commit_properties=properties,
            )
            .when_matched_delete(predicate=f"{flag} AND {v_s} >= {v_t}")
            .when_matched_update(updates=assignments, predicate=f"NOT {flag} AND ({guard})")
            .when_not_matched_insert(updates=assignments, predicate=f"NOT {flag}")
            .execute()
        )
        return attempt.written(
            table.version(),
            plan.changes + doomed.height,
            content,
            rows_inserted=int(metrics.get("num_target_rows_inserted", plan.inserts)),
            rows_updated=int(metrics.get("num_target_rows_updated", plan.updates)),
            details={"rows_deleted": int(metrics.get("num_target_rows_deleted", doomed.height))},
        )

    result = commit_retried(target, STRATEGY, once, snapshot=table_then_tombstones)
    return result, found[0]


def tombstones_table(target: LakeTable) -> LakeTable:
    """The Delta table beside ``target`` that keeps its tombstones."""
    return LakeTable(f"{target.uri}{TOMBSTONES_SUFFIX}", target.storage_options)


@dataclass(frozen=True)
class Tombstones:
    """Where a table's deleted keys and the versions of their newest deletes are kept: a
    Delta table beside it (``<table>__tombstones``), merged newest-wins, so storing the same
    deletes again, in any order or from two writers at once, changes nothing."""

    table: LakeTable
    key: tuple[str, ...]
    version_column: str

    @classmethod
    def beside(cls, target: LakeTable, key: Sequence[str], version_column: str) -> Tombstones:
        """The tombstones of ``target``."""
        return cls(
            tombstones_table(target),
            tuple(key),
            version_column,
        )

    def remember(self, deletes: pa.Table) -> None:
        """Keep ``deletes`` (key columns and version), before the MERGE that applies them."""
        if deletes.num_rows:
            merge_upsert(
                self.table,
                deletes.select([*self.key, self.version_column]),
                list(self.key),
                version_column=self.version_column,
            )

    def read(self) -> pa.Table | None:
        """Every tombstone (None before the first delete)."""
        stored = self.table.open()
        return None if stored is None else read_rows(stored)


def merge_with_deletes(
    target: LakeTable,
    data: FrameLike,
    key: Sequence[str],
    *,
    version_column: str,
    delete_column: tuple[str, object],
    prune_columns: Sequence[str] = (),
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """``merge_changes`` with its tombstones kept beside the table: the batch's deletes are
    stored first, then the MERGE reads them (again in each attempt). ``prune_columns``:
    columns fixed for a key (the key itself, a sign-up date) whose batch ``[min, max]``
    limits the files read and merged."""
    rows = to_arrow(data)
    stones = Tombstones.beside(target, key, version_column)
    column, marker = delete_column
    stones.remember(rows.filter(pc.equal(rows.column(column), pa.scalar(marker))))
    result, _ = merge_changes(
        target,
        rows,
        key,
        version_column=version_column,
        delete_column=delete_column,
        tombstones=stones.read,
        prune_columns=prune_columns,
        commit=commit,
    )
    return result


def _same_keys(key: Sequence[str], ranges: Sequence[Range]) -> str:
    """A MERGE's match: the key columns equal, the target pruned to ``ranges``."""
    return all_of(
        *(f"{quote_identifier(k, _TARGET)} = {quote_identifier(k, _SOURCE)}" for k in key),
        *(r.sql(_TARGET) for r in ranges),
    )


def _source_wins(version_column: str) -> str:
    """Where a source row replaces the stored row of its key: a newer version, or the same
    version when the batch decided the tie for it (``_TIE``)."""
    v_s = quote_identifier(version_column, _SOURCE)
    v_t = quote_identifier(version_column, _TARGET)
    return f"{v_s} > {v_t} OR ({v_s} = {v_t} AND {quote_identifier(_TIE, _SOURCE)})"
