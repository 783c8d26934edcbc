"""``idem/strategy: history``: SCD type 2 with ``lake.history``, a row per version of a key
with periods from the version column, only the affected keys rewritten in one MERGE."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from idem_assets.io_manager.batch import PreparedBatch, prepare
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes.rerun_equality import RerunComparison, day_rows
from idem_assets.io_manager.writes.strategy import SpecStrategy, WriteRequest
from idem_assets.lake import LakeTable, WriteResult, fingerprint
from idem_assets.lake.history import HistoryPlan, batch_events, merge_history, plan_history
from idem_assets.lake.history_deletes import history_deletes
from idem_assets.lake.merge import pruning_ranges

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from idem_assets.lake.predicates import Condition


class History(SpecStrategy):
    """SCD type 2: a row per version of a key, periods from the version column."""

    name = "history"
    on_spark = True

    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The whole table: a key's versions may sit in any file."""
        return []

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """The batch's versions and deletes added to the keys' histories, in one MERGE."""
        spec = self.spec
        assert spec.version_column is not None
        return merge_history(
            request.target,
            batch.rows,
            spec.natural_key,
            version_column=spec.version_column,
            delete_column=self._delete_marker(),
            prune_columns=spec.prune_columns,
            commit=request.commit,
        )

    def write_spark(
        self, request: WriteRequest, frame: Any, schema: pa.Schema
    ) -> tuple[WriteResult, int, int]:
        """A history's change set, read by the executors, is planned and merged by the
        driver: a day's change set is small, and its keys' stored histories are read by key."""
        from idem_assets.spark.schema import conform_spark

        rows = conform_spark(frame, schema).toArrow()
        return self.write_rows(request, prepare(self.spec, rows, schema)), 0, 0

    def compare(self, target: LakeTable, batch: PreparedBatch, window: Window) -> RerunComparison:
        """Whether loading the batch again would change any key's history."""
        plan = self._plan(target, batch.rows)
        return RerunComparison(
            passed=plan.changes == 0,
            rows_differing=plan.changes,
            expected=batch.fingerprint,
            stored=fingerprint(plan.current),
            detail=_history_detail(plan),
        )

    def compare_days(
        self, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """``compare`` day by day: each day's rows planned against the table (opened, and its
        kept deletes read, once for all the days)."""
        column = self.spec.partition_column or ""
        state = self._state(target)
        out = []
        for day in days:
            rows = day_rows(batch.rows, column, day)
            plan = self._plan(target, rows, state)
            out.append(
                RerunComparison(
                    passed=plan.changes == 0,
                    rows_differing=plan.changes,
                    expected=fingerprint(rows),
                    stored=fingerprint(plan.current),
                    detail=_history_detail(plan),
                )
            )
        return out

    def _delete_marker(self) -> tuple[str, object] | None:
        spec = self.spec
        return (spec.delete_column, spec.delete_value) if spec.delete_column else None

    def _plan(
        self,
        target: LakeTable,
        rows: pa.Table,
        opened: tuple[DeltaTable | None, pa.Table] | None = None,
    ) -> HistoryPlan:
        """What loading ``rows`` into the history again would change; ``opened``: the table
        and its kept deletes, read once for several plans."""
        spec = self.spec
        assert spec.version_column is not None
        table, deletes = opened or self._state(target)
        events = batch_events(rows, spec.natural_key, spec.version_column, self._delete_marker())
        ranges = pruning_ranges(rows, spec.prune_columns)
        return plan_history(table, events, spec.natural_key, spec.version_column, deletes, ranges)

    def _state(self, target: LakeTable) -> tuple[DeltaTable | None, pa.Table]:
        """The history table as it is, and every delete kept beside it."""
        assert self.spec.version_column is not None
        return target.open(), history_deletes(
            target, self.spec.natural_key, self.spec.version_column
        )


def _history_detail(plan: HistoryPlan) -> str:
    inserts, updates, removals = plan.inserts.height, plan.updates.height, plan.removals.height
    if inserts or updates or removals:
        return (
            f"loading again would insert {inserts}, update {updates} and remove {removals} "
            "history row(s)"
        )
    return "every version is in the history, with the periods the rule gives"
