"""The write strategies as objects: what a write covers, touches, writes and compares.

One object per strategy (``overwrite``, ``merge``, ``replace``), chosen in one place
(``strategy_for``) from one mapping; the IO manager, the Spark handler and the checks ask
the same object, so what a write replaces, what it signs and what its rerun check
compares cannot drift apart.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from idem_assets._lazy import lazy_module
from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.noop import same_content
from idem_assets.io_manager.slices import (
    PartitionSlice,
    arrow_type_of,
    partition_slice,
    partitions_label,
)
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.lake import (
    Fingerprint,
    LakeTable,
    Proof,
    WriteOptions,
    WriteResult,
    count_row_differences,
    date_range,
    fingerprint,
    merge_upsert,
    merge_with_deletes,
    overwrite_slice,
    plan_merge,
    read_rows,
    replace_table,
)
from idem_assets.lake.fingerprint import EMPTY_FINGERPRINT, fingerprints_by
from idem_assets.lake.history import HistoryPlan, batch_events, merge_history, plan_history
from idem_assets.lake.history_deletes import history_deletes
from idem_assets.lake.merge import (
    ChangePlan,
    Tombstones,
    plan_changes,
    pruning_ranges,
    tombstones_of,
)
from idem_assets.lake.predicates import Condition

if TYPE_CHECKING:
    import dagster as dg
    import pyarrow as pa
    from deltalake import DeltaTable
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy

    from idem_assets.io_manager.tracking import SettledWrite


@dataclass(frozen=True)
class RerunComparison:
    """Whether the table already equals what a clean rerun would produce."""

    passed: bool
    rows_differing: int
    expected: Fingerprint
    stored: Fingerprint
    detail: str


class WriteStrategy(ABC):
    """One idempotent write strategy: its slice, the part it touches, its write, its check."""

    name: ClassVar[str]

    def covers(
        self, context: dg.OutputContext | dg.InputContext, spec: WriteSpec, schema: pa.Schema | None
    ) -> PartitionSlice:
        """What an output's write covers. Here the partitions only name the record: the
        strategy itself decides which rows it changes."""
        if not context.has_asset_partitions:
            return PartitionSlice.whole_table()
        label, days = partitions_label(context)
        return PartitionSlice((), (), label, days)

    @abstractmethod
    def touched(
        self, spec: WriteSpec, covered: PartitionSlice, batch: PreparedBatch | None
    ) -> list[Condition]:
        """The part of the table a write of ``batch`` can change; its files are signed.

        ``batch`` is None when the rows never reach the driver (a stream, a Spark frame).
        """

    def streams(self, spec: WriteSpec, window: Window) -> bool:
        """Whether a record-batch stream can be written as it arrives, in flat memory."""
        return False

    def write(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None = None,
        *,
        settled: SettledWrite | None = None,
        options: WriteOptions | None = None,
    ) -> WriteResult:
        """Write a prepared batch; a no-op when nothing changed.

        With ``settled`` (the slice's last settled write), a batch with the same fingerprint
        over a slice whose files have not changed since is a proven no-op, decided from
        table metadata without reading any data.
        """
        if settled is not None:
            table = target.open()
            batch_fp = batch.fingerprint
            touched = self.touched(spec, covered, batch)
            if table is not None and same_content(settled, table, batch_fp, touched):
                return WriteResult.unchanged(
                    spec.strategy,
                    target.uri,
                    table.version(),
                    batch_fp,
                    proof=Proof.CHECKPOINT,
                    details={"record": settled.record_id},
                )
        return self.write_rows(spec, target, batch, covered, commit_metadata, options)

    @abstractmethod
    def write_rows(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None,
        options: WriteOptions | None,
    ) -> WriteResult:
        """The strategy's own write (it still commits nothing when the table holds the rows)."""

    def compare(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
    ) -> RerunComparison:
        """Compare a recomputed batch with what the table holds, without writing."""
        expected = batch.fingerprint
        ranges = self.touched(spec, window_slice(spec, window), None)
        stored_rows = read_rows(target.open(), batch.rows.schema, ranges=ranges)
        stored = fingerprint(stored_rows)
        return _compared(window, expected, stored, lambda: (batch.rows, stored_rows))

    def compare_days(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """``compare`` for each of ``days`` (adjacent), from a batch recomputed for all of
        them: one read of the table, results split by the partition column."""
        return [
            self.compare(spec, target, _rows_of(batch, spec, day), Window.day(day)) for day in days
        ]


def _compare_changes(spec: WriteSpec, target: LakeTable, batch: PreparedBatch) -> RerunComparison:
    """``Merge.compare`` for a batch of upserts and deletes, against the kept tombstones."""
    plan = _plan_changes(spec, target, batch)
    upserts = plan.upserts
    return RerunComparison(
        passed=plan.changes == 0,
        rows_differing=plan.changes,
        expected=batch.fingerprint,
        stored=fingerprint(upserts.current),
        detail=_changes_detail(upserts.inserts, upserts.updates, plan.deletes.height),
    )


def _plan_changes(spec: WriteSpec, target: LakeTable, batch: PreparedBatch) -> ChangePlan:
    """What a rerun's MERGE of the batch's upserts and deletes would change."""
    assert spec.delete_column is not None and spec.version_column is not None
    stones = Tombstones.beside(target, spec.natural_key, spec.version_column)
    marker = (spec.delete_column, spec.delete_value)
    kept = tombstones_of(batch.rows, spec.natural_key, spec.version_column, marker, stones.read())
    return plan_changes(
        target.open(),
        batch.rows,
        spec.natural_key,
        spec.version_column,
        marker,
        kept,
        spec.prune_columns,
    )


def _compare_change_days(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
) -> list[RerunComparison]:
    """``Merge.compare_days`` with deletes: one plan, each change counted on the day of the
    batch row that makes it (a delete on the day of its delete row)."""
    import polars as pl  # here, not at import: see idem_assets._lazy

    assert spec.delete_column is not None and spec.version_column is not None
    column, key = spec.partition_column or "", list(spec.natural_key)
    plan = _plan_changes(spec, target, batch)
    upserts = plan.upserts
    stored_keys = pl.from_arrow(upserts.current.select(key)).unique()
    assert isinstance(stored_keys, pl.DataFrame)
    updated = upserts.winners.join(
        stored_keys.with_columns(pl.lit(True).alias("__stored")), on=key, how="left"
    ).select(column, pl.col("__stored").fill_null(False).alias("__stored"))
    rows = pl.from_arrow(batch.rows.select([*key, spec.version_column, column]))
    assert isinstance(rows, pl.DataFrame)
    deleted = plan.deletes.join(rows.unique(), on=[*key, spec.version_column], how="inner")
    counts = {
        row[column]: row
        for row in pl.concat(
            [
                updated.with_columns(pl.lit(False).alias("__deleted")),
                deleted.select(column).with_columns(
                    pl.lit(True).alias("__stored"), pl.lit(True).alias("__deleted")
                ),
            ]
        )
        .group_by(column)
        .agg(
            pl.len().alias("changes"),
            (pl.col("__stored") & ~pl.col("__deleted")).sum().alias("updates"),
            pl.col("__deleted").sum().alias("deletes"),
        )
        .to_dicts()
    }
    stored_by = fingerprints_by(upserts.current, column)
    expected_by = fingerprints_by(batch.rows, column)
    out = []
    for day in days:
        found = counts.get(day, {"changes": 0, "updates": 0, "deletes": 0})
        changes, updates, deletes = found["changes"], found["updates"], found["deletes"]
        out.append(
            RerunComparison(
                passed=changes == 0,
                rows_differing=changes,
                expected=expected_by.get(day, EMPTY_FINGERPRINT),
                stored=stored_by.get(day, EMPTY_FINGERPRINT),
                detail=_changes_detail(changes - updates - deletes, updates, deletes),
            )
        )
    return out


def _changes_detail(inserts: int, updates: int, deletes: int) -> str:
    if inserts or updates or deletes:
        return f"a rerun would insert {inserts}, update {updates} and delete {deletes} row(s)"
    return "every batch row is stored, deleted or superseded by a newer version"


class Overwrite(WriteStrategy):
    """Replace exactly the output's partitions (replaceWhere) in one commit."""

    name = "overwrite"

    def covers(
        self, context: dg.OutputContext | dg.InputContext, spec: WriteSpec, schema: pa.Schema | None
    ) -> PartitionSlice:
        """Exactly the run's partitions of the partition column(s)."""
        if not context.has_asset_partitions:
            return PartitionSlice.whole_table()
        return partition_slice(context, spec.partition_columns, arrow_type_of(schema))

    def touched(
        self, spec: WriteSpec, covered: PartitionSlice, batch: PreparedBatch | None
    ) -> list[Condition]:
        """The covered partitions (or the window's days of the partition column)."""
        if covered.conditions:
            return list(covered.conditions)
        start, end = _require_window(spec, covered.window)
        return [date_range(spec.partition_column or "", start, end)]

    def streams(self, spec: WriteSpec, window: Window) -> bool:
        """Date partitions without deduplication: anything else needs the whole batch."""
        return (
            window.partitioned
            and spec.partition_column is not None
            and not spec.partition_expr
            and not (spec.dedupe and spec.natural_key)
        )

    def write_rows(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None,
        options: WriteOptions | None,
    ) -> WriteResult:
        """replaceWhere of the covered partitions, laid out by the partition column(s)."""
        partition_by = covered.partition_by if covered.conditions else (spec.partition_column,)
        return overwrite_slice(
            target,
            batch.rows,
            self.touched(spec, covered, batch),
            partition_by=[c for c in partition_by if c],
            commit_metadata=commit_metadata,
            known_fingerprint=batch.fingerprint_job,
            options=options or WriteOptions(),
        )

    def compare_days(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """The stored days read once and fingerprinted day by day against the batch's."""
        column = spec.partition_column or ""
        span = Window(min(days), max(days) + dt.timedelta(days=1))
        ranges = self.touched(spec, window_slice(spec, span), None)
        stored_rows = read_rows(target.open(), batch.rows.schema, ranges=ranges)
        expected_by = fingerprints_by(batch.rows, column)
        stored_by = fingerprints_by(stored_rows, column)
        return [
            _compared(
                Window.day(day),
                expected_by.get(day, EMPTY_FINGERPRINT),
                stored_by.get(day, EMPTY_FINGERPRINT),
                lambda day=day: (  # type: ignore[misc]
                    day_rows(batch.rows, column, day),
                    day_rows(stored_rows, column, day),
                ),
            )
            for day in days
        ]


class Merge(WriteStrategy):
    """Upsert the newest row per natural key (MERGE), pruned to the batch's key ranges."""

    name = "merge"

    def touched(
        self, spec: WriteSpec, covered: PartitionSlice, batch: PreparedBatch | None
    ) -> list[Condition]:
        """The batch's ``[min, max]`` of the pruning columns; the whole table unread."""
        return [] if batch is None else list(pruning_ranges(batch.rows, spec.prune_columns))

    def write_rows(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None,
        options: WriteOptions | None,
    ) -> WriteResult:
        """MERGE of the winners on the natural key (and of the deletes, when declared)."""
        if spec.delete_column is not None:
            assert spec.version_column is not None
            return merge_with_deletes(
                target,
                batch.rows,
                spec.natural_key,
                version_column=spec.version_column,
                delete_column=(spec.delete_column, spec.delete_value),
                prune_columns=spec.prune_columns,
                commit_metadata=commit_metadata,
                options=options or WriteOptions(),
            )
        return merge_upsert(
            target,
            batch.rows,
            spec.natural_key,
            version_column=spec.version_column,
            partition_column=spec.partition_column,
            prune_columns=spec.prune_columns,
            commit_metadata=commit_metadata,
            deduplicated=batch.dedupe_result() if spec.dedupe else None,
            known_fingerprint=batch.fingerprint,
            options=options or WriteOptions(),
        )

    def compare(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
    ) -> RerunComparison:
        """Whether a rerun's MERGE would insert or update any row (or delete one)."""
        if spec.delete_column is not None:
            return _compare_changes(spec, target, batch)
        plan = plan_merge(
            target.open(), batch.rows, spec.natural_key, spec.version_column, spec.prune_columns
        )
        return RerunComparison(
            passed=plan.changes == 0,
            rows_differing=plan.changes,
            expected=batch.fingerprint,
            stored=fingerprint(plan.current),
            detail=(
                f"a rerun would insert {plan.inserts} and update {plan.updates} row(s)"
                if plan.changes
                else "every batch row is stored or superseded by a newer version"
            ),
        )

    def compare_days(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """One merge plan for all the days, its changes counted per day of the batch rows."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        if spec.delete_column is not None:
            return _compare_change_days(spec, target, batch, days)

        column = spec.partition_column or ""
        plan = plan_merge(
            target.open(), batch.rows, spec.natural_key, spec.version_column, spec.prune_columns
        )
        key = list(spec.natural_key)
        stored_keys = pl.from_arrow(plan.current.select(key)).unique()
        assert isinstance(stored_keys, pl.DataFrame)
        flagged = plan.winners.join(
            stored_keys.with_columns(pl.lit(True).alias("__stored")), on=key, how="left"
        )
        counts = {
            row[column]: (row["changes"], row["updates"])
            for row in flagged.group_by(column)
            .agg(
                pl.len().alias("changes"),
                pl.col("__stored").fill_null(False).sum().alias("updates"),
            )
            .to_dicts()
        }
        stored_by = fingerprints_by(plan.current, column)
        expected_by = fingerprints_by(batch.rows, column)
        out = []
        for day in days:
            changes, updates = counts.get(day, (0, 0))
            out.append(
                RerunComparison(
                    passed=changes == 0,
                    rows_differing=changes,
                    expected=expected_by.get(day, EMPTY_FINGERPRINT),
                    stored=stored_by.get(day, EMPTY_FINGERPRINT),
                    detail=(
                        f"a rerun would insert {changes - updates} and update {updates} row(s)"
                        if changes
                        else "every batch row is stored or superseded by a newer version"
                    ),
                )
            )
        return out


class Replace(WriteStrategy):
    """Swap the whole table atomically."""

    name = "replace"

    def touched(
        self, spec: WriteSpec, covered: PartitionSlice, batch: PreparedBatch | None
    ) -> list[Condition]:
        """The whole table."""
        return []

    def write_rows(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None,
        options: WriteOptions | None,
    ) -> WriteResult:
        """One commit that replaces every row."""
        return replace_table(
            target,
            batch.rows,
            commit_metadata=commit_metadata,
            allow_empty=spec.allow_empty,
            known_fingerprint=batch.fingerprint,
            options=options or WriteOptions(),
        )


class History(WriteStrategy):
    """SCD type 2: a row per version of a key, periods from the version column."""

    name = "history"

    def touched(
        self, spec: WriteSpec, covered: PartitionSlice, batch: PreparedBatch | None
    ) -> list[Condition]:
        """The whole table: a key's versions may sit in any file."""
        return []

    def write_rows(
        self,
        spec: WriteSpec,
        target: LakeTable,
        batch: PreparedBatch,
        covered: PartitionSlice,
        commit_metadata: Mapping[str, Any] | None,
        options: WriteOptions | None,
    ) -> WriteResult:
        """The batch's versions and deletes added to the keys' histories, in one MERGE."""
        assert spec.version_column is not None
        return merge_history(
            target,
            batch.rows,
            spec.natural_key,
            version_column=spec.version_column,
            delete_column=_delete_marker(spec),
            prune_columns=spec.prune_columns,
            commit_metadata=commit_metadata,
        )

    def compare(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
    ) -> RerunComparison:
        """Whether loading the batch again would change any key's history."""
        plan = _plan_history(spec, target, batch.rows)
        return RerunComparison(
            passed=plan.changes == 0,
            rows_differing=plan.changes,
            expected=batch.fingerprint,
            stored=fingerprint(plan.current),
            detail=_history_detail(plan.inserts.height, plan.updates.height, plan.removals.height),
        )

    def compare_days(
        self, spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """``compare`` day by day: each day's rows planned against the table (opened, and its
        kept deletes read, once for all the days)."""
        column = spec.partition_column or ""
        state = _history_state(spec, target)
        out = []
        for day in days:
            rows = day_rows(batch.rows, column, day)
            plan = _plan_history(spec, target, rows, state)
            out.append(
                RerunComparison(
                    passed=plan.changes == 0,
                    rows_differing=plan.changes,
                    expected=fingerprint(rows),
                    stored=fingerprint(plan.current),
                    detail=_history_detail(
                        plan.inserts.height, plan.updates.height, plan.removals.height
                    ),
                )
            )
        return out


def _delete_marker(spec: WriteSpec) -> tuple[str, object] | None:
    return (spec.delete_column, spec.delete_value) if spec.delete_column else None


def _plan_history(
    spec: WriteSpec,
    target: LakeTable,
    rows: pa.Table,
    opened: tuple[DeltaTable | None, pa.Table] | None = None,
) -> HistoryPlan:
    """What loading ``rows`` into the history again would change; ``opened``: the table and
    its kept deletes, read once for several plans."""
    assert spec.version_column is not None
    table, deletes = opened or _history_state(spec, target)
    events = batch_events(rows, spec.natural_key, spec.version_column, _delete_marker(spec))
    ranges = pruning_ranges(rows, spec.prune_columns)
    return plan_history(table, events, spec.natural_key, spec.version_column, deletes, ranges)


def _history_state(spec: WriteSpec, target: LakeTable) -> tuple[DeltaTable | None, pa.Table]:
    """The history table as it is, and every delete kept beside it."""
    assert spec.version_column is not None
    return target.open(), history_deletes(target, spec.natural_key, spec.version_column)


def _history_detail(inserts: int, updates: int, removals: int) -> str:
    if inserts or updates or removals:
        return (
            f"loading again would insert {inserts}, update {updates} and remove {removals} "
            "history row(s)"
        )
    return "every version is in the history, with the periods the rule gives"


STRATEGIES: Mapping[str, WriteStrategy] = {
    s.name: s for s in (Overwrite(), Merge(), Replace(), History())
}


def strategy_for(spec: WriteSpec) -> WriteStrategy:
    """The strategy object that writes ``spec``'s table (append is a stream's own write)."""
    strategy = STRATEGIES.get(spec.strategy)
    if strategy is None:
        raise ValueError(
            f"strategy {spec.strategy!r} is written by its own asset, not the IO manager"
        )
    return strategy


def window_slice(spec: WriteSpec, window: Window) -> PartitionSlice:
    """The slice of a daily window on the spec's partition column (whole table without)."""
    if window.partitioned and spec.partition_column:
        return PartitionSlice.of_window(spec.partition_column, window)
    return PartitionSlice((), (), window.record_key(), window)


def write(
    spec: WriteSpec,
    target: LakeTable,
    batch: PreparedBatch,
    window: Window,
    commit_metadata: Mapping[str, Any] | None = None,
    *,
    settled: SettledWrite | None = None,
    conditions: Sequence[Condition] = (),
    partition_by: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Write a prepared batch with the spec's strategy over ``window``; no-op when unchanged.

    An overwrite replaces exactly ``conditions`` (laid out by ``partition_by`` when it
    creates the table), or else the spec's days of ``window``. ``options`` are
    ``WriteOptions`` fields.
    """
    if conditions:
        covered = PartitionSlice(
            tuple(conditions), tuple(partition_by), window.record_key(), window
        )
    else:
        covered = window_slice(spec, window)
    return strategy_for(spec).write(
        spec,
        target,
        batch,
        covered,
        commit_metadata,
        settled=settled,
        options=WriteOptions(**dict(options or {})),
    )


def compare(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
) -> RerunComparison:
    """Compare a recomputed batch with what the table holds, without writing."""
    return strategy_for(spec).compare(spec, target, batch, window)


def read(spec: WriteSpec, target: LakeTable, window: Window, schema: pa.Schema | None) -> pa.Table:
    """The rows a downstream asset sees for ``window`` (the whole table if unpartitioned)."""
    table = target.open()
    ranges = []
    if window.partitioned and spec.partition_column:
        assert window.start is not None and window.end is not None
        ranges.append(date_range(spec.partition_column, window.start, window.end))
    if table is None:
        if schema is None:
            raise FileNotFoundError(f"no Delta table at {target.uri}; materialize it first")
        return schema.empty_table()
    return read_rows(table, ranges=ranges)


def _compared(
    window: Window,
    expected: Fingerprint,
    stored: Fingerprint,
    rows: Callable[[], tuple[pa.Table, pa.Table]],
) -> RerunComparison:
    """The comparison of two fingerprints; the differing rows are counted only when they
    differ (``rows`` gives the recomputed and the stored rows)."""
    differing = 0 if stored == expected else count_row_differences(*rows())
    return RerunComparison(
        passed=stored == expected,
        rows_differing=differing,
        expected=expected,
        stored=stored,
        detail=f"{window.label()}: {differing} row(s) differ between the table and a clean rerun",
    )


def compare_days(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
) -> list[RerunComparison]:
    """``compare`` for each of ``days`` (adjacent), from one batch recomputed for all."""
    return strategy_for(spec).compare_days(spec, target, batch, days)


def day_rows(rows: pa.Table, column: str, day: dt.date) -> pa.Table:
    """The rows whose ``column`` is ``day``."""
    import pyarrow.compute as pc  # here, not at import: see idem_assets._lazy

    return rows.filter(
        pc.equal(rows.column(column), pa.scalar(day, rows.schema.field(column).type))
    )


def _rows_of(batch: PreparedBatch, spec: WriteSpec, day: dt.date) -> PreparedBatch:
    """The batch's rows of one day, as a batch of their own."""
    rows = day_rows(batch.rows, spec.partition_column or "", day)
    return PreparedBatch(rows, rows.num_rows, 0, 0, fingerprint(rows))


def _require_window(spec: WriteSpec, window: Window) -> tuple[dt.date, dt.date]:
    if not window.partitioned:
        raise ValueError(f"strategy {spec.strategy!r} needs a partitioned asset")
    assert window.start is not None and window.end is not None
    return window.start, window.end
