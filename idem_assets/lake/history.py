"""History (SCD type 2) of keyed events, the same table whatever order they are loaded in.

The rule. Every event is an upsert (key, version, attributes) or a delete (key, version): a
row whose ``delete_column[0]`` equals ``delete_column[1]``, a column read and never stored.
Per key and version one event counts: a delete beats upserts, and of two upserts the greater
content wins (``survivor_order``, as in the newest-wins merge). Each counted upsert is one
row, ``valid_from`` its version and ``valid_to`` the version of the key's next counted event
(upsert or delete), null if none; ``is_current`` is ``valid_to`` being null. A delete closes
the version before it and makes no row; a later upsert brings the key back.

Validity comes from the declared version, never from load time, and equal consecutive
versions are not merged into one row: that would lose events, and a late version arriving
between them would then give a table that depends on load order. So the table is a function
of the set of events loaded so far: days loaded forward, backward, twice, or by two writers
at once give one table.

Deletes make no row, so they are kept (all of them) in a Delta table beside the history,
``<table>__history_deletes``, stored before the history MERGE. A load reads the stored rows
and deletes of its batch's keys, recomputes those keys' histories (a stored row is an upsert
at its ``valid_from``) and applies only the differences in one MERGE on (key, valid_from).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalake import CommitProperties, DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.faults import crash_point
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.dedupe import DELETE_FLAG, survivor_sort
from idem_assets.lake.fingerprint import fingerprint
from idem_assets.lake.frames import FrameLike, conform, to_arrow, to_polars
from idem_assets.lake.history_deletes import BatchDeletes
from idem_assets.lake.merge import pruning_ranges
from idem_assets.lake.predicates import Range, all_of, quote_identifier
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import (
    DEFAULT_OPTIONS,
    LakeTable,
    check_columns,
    create_table,
    rows_of_keys,
    table_schema,
)

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


STRATEGY = "history"
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"
PERIOD = (VALID_FROM, VALID_TO, IS_CURRENT)
_DELETE = DELETE_FLAG
_GONE = "__idem_gone"
_SOURCE, _TARGET = "s", "t"
# Rounds of planning again when another writer stored deletes of our keys meanwhile.
_ROUNDS = 16


def history_of(events: pl.DataFrame, key: Sequence[str], version_column: str) -> pl.DataFrame:
    """The history rows the rule gives for ``events`` (``_DELETE`` marks the deletes)."""
    key = list(key)
    # Sorted by key, version descending: the row before is the key's next event.
    counted = survivor_sort(events, key, version_column).unique(
        subset=[*key, version_column], keep="first", maintain_order=True
    )
    data = [c for c in events.columns if c != _DELETE]
    return (
        counted.with_columns(pl.col(version_column).shift(1).over(key).alias(VALID_TO))
        .filter(~pl.col(_DELETE))
        .with_columns(
            pl.col(version_column).alias(VALID_FROM), pl.col(VALID_TO).is_null().alias(IS_CURRENT)
        )
        .select([*data, *PERIOD])
        .sort([*key, VALID_FROM])
    )


def batch_events(
    rows: pa.Table,
    key: Sequence[str],
    version_column: str,
    delete_column: tuple[str, object] | None,
) -> pl.DataFrame:
    """The batch as events: its data columns and ``_DELETE`` (the delete column dropped)."""
    frame = to_polars(rows)
    clash = [c for c in (*PERIOD, _DELETE, _GONE) if c in frame.columns]
    if clash:
        raise ValueError(f"columns {clash} are reserved for the history bookkeeping")
    if delete_column is None:
        events = frame.with_columns(pl.lit(False).alias(_DELETE))
    else:
        column, marker = delete_column
        deleted = (pl.col(column) == marker).fill_null(False)
        events = frame.with_columns(deleted.alias(_DELETE)).drop(column)
    required = [*key, version_column]
    if events.select(pl.any_horizontal(pl.col(required).is_null()).any()).item():
        raise ValueError(f"history events need {required} on every row; some are null")
    return events


@dataclass(frozen=True)
class HistoryPlan:
    """The differences between the stored history of a batch's keys and the rule's."""

    schema: pa.Schema  # of the history table
    inserts: pl.DataFrame
    updates: pl.DataFrame  # same (key, valid_from), other period or attributes
    removals: pl.DataFrame  # stored rows that must go (a delete arrived at their version)
    current: pl.DataFrame  # the stored history rows of the batch's keys

    @property
    def changes(self) -> int:
        """Rows inserted, updated or deleted; 0 means the load is a no-op."""
        return self.inserts.height + self.updates.height + self.removals.height


def plan_history(
    table: DeltaTable | None,
    events: pl.DataFrame,
    key: Sequence[str],
    version_column: str,
    deletes: pa.Table,
    ranges: Sequence[Range] = (),
) -> HistoryPlan:
    """Recompute the histories of the keys of ``events`` from the stored rows, ``deletes``
    and ``events``, and compare them with the stored rows (read from the files that may
    hold ``ranges``: the batch's ``[min, max]`` of columns fixed for a key)."""
    key = list(key)
    data = [c for c in events.columns if c != _DELETE]
    if table is None:
        source = events.select(data).to_arrow().schema
        version = source.field(version_column).type
        schema = pa.schema(
            [*source, (VALID_FROM, version), (VALID_TO, version), (IS_CURRENT, pa.bool_())]
        )
    else:
        schema = table_schema(table)
        check_columns(events.select(data).to_arrow(), table, DEFAULT_OPTIONS)
    fields = pa.schema([f for f in schema if f.name not in PERIOD])
    incoming = events.select([*fields.names, _DELETE])
    typed = to_polars(conform(incoming.to_arrow(), fields)).with_columns(
        incoming.get_column(_DELETE)
    )
    have = to_polars(rows_of_keys(table, typed.select(key).unique(), schema, ranges))
    kept = have.drop(VALID_TO, IS_CURRENT, version_column).rename({VALID_FROM: version_column})
    gone = to_polars(deletes).with_columns(pl.lit(True).alias(_DELETE))
    everything = pl.concat(
        [kept.with_columns(pl.lit(False).alias(_DELETE)), typed, gone], how="diagonal_relaxed"
    )
    want = to_polars(conform(history_of(everything, key, version_column).to_arrow(), schema))
    on = [*key, VALID_FROM]
    return HistoryPlan(
        schema=schema,
        inserts=want.join(have.select(on), on=on, how="anti"),
        updates=want.join(have, on=schema.names, how="anti", nulls_equal=True).join(
            have.select(on), on=on, how="semi"
        ),
        removals=have.join(want.select(on), on=on, how="anti"),
        current=have,
    )


def merge_history(
    target: LakeTable,
    data: FrameLike,
    key: Sequence[str],
    *,
    version_column: str,
    delete_column: tuple[str, object] | None = None,
    prune_columns: Sequence[str] = (),
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Add the events of ``data`` to the history ``target`` (the rule: module docstring).
    ``prune_columns``: columns fixed for a key whose batch ``[min, max]`` limits the files
    read and merged. Of ``commit`` it takes the metadata, txn and fingerprint: a history
    table is created and written without ``options``.

    The batch's deletes are stored beside the table first. Each attempt reads the stored
    deletes and rows of the batch's keys, so a writer that lost a race re-plans from the
    winner's table. After the commit the deletes are read once more: another writer may have
    stored deletes of our keys after we read them and then found no row of ours to close
    (we had not committed yet); then we plan again. An unchanged load commits nothing.
    """
    key = list(key)
    rows = to_arrow(data)
    content = commit.fingerprint_of(rows)
    properties = commit.properties({"idem.fingerprint": str(content)})
    ranges = pruning_ranges(rows, prune_columns)
    events = batch_events(rows, key, version_column, delete_column)
    keys = events.select(key).unique()
    batch_deletes = events.filter(pl.col(_DELETE)).select([*key, version_column]).to_arrow()
    log = BatchDeletes(target, keys, batch_deletes.schema)
    log.remember(batch_deletes)
    details = {"deletes": batch_deletes.num_rows}
    planned: list[tuple[pa.Table, int]] = []

    def deletes_then_table() -> DeltaTable | None:
        # What each try plans on: the stored deletes (kept in ``planned`` for the check
        # after the commit), then the table.
        planned[:] = [log.read()]
        return target.open()

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        plan = plan_history(table, events, key, version_column, planned[0][0], ranges)
        if table is None:
            create_table(target, conform(plan.inserts.to_arrow(), plan.schema), properties)
            return attempt.inserted(0, plan.inserts.height, content, details=details)
        if plan.changes == 0:
            return attempt.unchanged(content, proof=Proof.CONTENT, details=details)
        crash_point(f"lake.history_planned/{target.uri.rsplit('/', 1)[-1]}")
        metrics = _execute(table, plan, key, properties, ranges)
        return attempt.written(
            table.version(),
            plan.changes,
            content,
            rows_inserted=int(metrics.get("num_target_rows_inserted", plan.inserts.height)),
            rows_updated=int(metrics.get("num_target_rows_updated", plan.updates.height)),
            rows_deleted=int(metrics.get("num_target_rows_deleted", plan.removals.height)),
            details={**details, "rows_copied": metrics.get("num_target_rows_copied")},
        )

    results: list[WriteResult] = []
    for _ in range(_ROUNDS):
        results.append(commit_retried(target, STRATEGY, once, snapshot=deletes_then_table))
        (used, seen), (now, version) = planned[0], log.read()
        if version == seen or fingerprint(now) == fingerprint(used):
            return _combined(results)
    raise RuntimeError(
        f"{target.uri}: deletes of this batch's keys kept arriving for {_ROUNDS} rounds"
    )


def _execute(
    table: DeltaTable,
    plan: HistoryPlan,
    key: Sequence[str],
    properties: CommitProperties,
    ranges: Sequence[Range] = (),
) -> dict[str, Any]:
    """Apply ``plan`` in one MERGE on (key, valid_from): removals flagged, the rest upserted."""
    names = plan.schema.names
    frame = pl.concat(
        [
            plan.inserts.with_columns(pl.lit(False).alias(_GONE)),
            plan.updates.with_columns(pl.lit(False).alias(_GONE)),
            plan.removals.with_columns(pl.lit(True).alias(_GONE)),
        ],
        how="vertical_relaxed",
    ).to_arrow()
    source = pa.Table.from_arrays(
        [*conform(frame, plan.schema).columns, frame.column(_GONE)], names=[*names, _GONE]
    )
    on = all_of(
        *(
            f"{quote_identifier(c, _TARGET)} = {quote_identifier(c, _SOURCE)}"
            for c in (*key, VALID_FROM)
        ),
        *(r.sql(_TARGET) for r in ranges),
    )
    gone = quote_identifier(_GONE, _SOURCE)
    assignments = {quote_identifier(c): quote_identifier(c, _SOURCE) for c in names}
    return (
        table.merge(
            source,
            predicate=on,
            source_alias=_SOURCE,
            target_alias=_TARGET,
            commit_properties=properties,
        )
        .when_matched_delete(predicate=gone)
        .when_matched_update(updates=assignments, predicate=f"NOT {gone}")
        .when_not_matched_insert(updates=assignments, predicate=f"NOT {gone}")
        .execute()
    )


def _combined(results: list[WriteResult]) -> WriteResult:
    """One result for a load planned in several rounds: committed if any round committed."""
    last = results[-1]
    if len(results) == 1 or not any(r.committed for r in results):
        return dataclasses.replace(last, attempts=sum(r.attempts for r in results))
    return dataclasses.replace(
        last,
        committed=True,
        proof=Proof.NONE,
        rows_written=sum(r.rows_written for r in results),
        rows_inserted=sum(r.rows_inserted for r in results),
        rows_updated=sum(r.rows_updated for r in results),
        rows_deleted=sum(r.rows_deleted for r in results),
        attempts=sum(r.attempts for r in results),
    )


PROBLEM = "problem"
_NEXT, _BY_DELETE = "__idem_next", "__idem_by_delete"


def history_problems(
    rows: pa.Table, key: Sequence[str], *, deletes: pa.Table | None = None
) -> pa.Table:
    """One row (key columns, ``problem``) per key and invariant its history breaks.

    Checked: at most one current row per key; ``valid_to`` after ``valid_from``;
    ``is_current`` exactly when ``valid_to`` is null; no overlap with the key's next row;
    and every ``valid_to`` is the next row's ``valid_from`` or the version of a delete of
    the key. ``deletes`` holds the key columns and one more, the version of each delete (as
    ``history_deletes`` gives them); without it no delete explains a gap.
    """
    key = list(key)
    frame = (
        to_polars(rows.select([*key, *PERIOD]))
        .sort([*key, VALID_FROM])
        .with_columns(pl.col(VALID_FROM).shift(-1).over(key).alias(_NEXT))
    )
    if deletes is not None and deletes.num_rows:
        versions = [c for c in deletes.column_names if c not in key]
        if len(versions) != 1:
            raise ValueError(f"deletes need the key columns and one version, not {versions}")
        ends = to_polars(deletes.select([*key, *versions])).rename({versions[0]: VALID_TO})
        ends = ends.cast({VALID_TO: frame.schema[VALID_TO]}).unique()
        frame = frame.join(
            ends.with_columns(pl.lit(True).alias(_BY_DELETE)), on=[*key, VALID_TO], how="left"
        )
    else:
        frame = frame.with_columns(pl.lit(None, pl.Boolean).alias(_BY_DELETE))
    valid_to, following = pl.col(VALID_TO), pl.col(_NEXT)
    unexplained = ~pl.col(_BY_DELETE).fill_null(False)
    rules = {
        "more than one current row": pl.col(IS_CURRENT).cast(pl.Int64).sum().over(key) > 1,
        "valid_to is not after valid_from": valid_to <= pl.col(VALID_FROM),
        "is_current disagrees with valid_to": pl.col(IS_CURRENT) != valid_to.is_null(),
        "overlaps the next version": following.is_not_null()
        & (valid_to.is_null() | (valid_to > following)),
        "gap before the next version, no delete there": (valid_to < following) & unexplained,
        "closed with no later version or delete": following.is_null()
        & valid_to.is_not_null()
        & unexplained,
    }
    found = [
        frame.filter(rule.fill_null(False)).select(key).with_columns(pl.lit(text).alias(PROBLEM))
        for text, rule in rules.items()
    ]
    return pl.concat(found).unique().sort([*key, PROBLEM]).to_arrow()
