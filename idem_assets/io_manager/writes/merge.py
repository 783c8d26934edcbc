"""``idem/strategy: merge``: upsert the newest row per natural key (and apply deletes) with
``lake.merge``, pruned to the batch's key ranges. dagster-delta's ``mode: merge`` with its
own clauses is ``clause_merge``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes.rerun_equality import RerunComparison
from idem_assets.io_manager.writes.strategy import SpecStrategy, WriteRequest
from idem_assets.lake import LakeTable, WriteResult, fingerprint, merge_upsert, plan_merge
from idem_assets.lake.fingerprint import EMPTY_FINGERPRINT, fingerprints_by
from idem_assets.lake.merge import (
    ChangePlan,
    Tombstones,
    merge_with_deletes,
    plan_changes,
    pruning_ranges,
    tombstones_of,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from idem_assets.lake.predicates import Condition


class Merge(SpecStrategy):
    """Upsert the newest row per natural key (MERGE), pruned to the batch's key ranges."""

    name = "merge"
    on_spark = True

    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The batch's ``[min, max]`` of the pruning columns; the whole table unread."""
        return [] if batch is None else list(pruning_ranges(batch.rows, self.spec.prune_columns))

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """MERGE of the winners on the natural key (and of the deletes, when declared)."""
        spec = self.spec
        if spec.delete_column is not None:
            assert spec.version_column is not None
            return merge_with_deletes(
                request.target,
                batch.rows,
                spec.natural_key,
                version_column=spec.version_column,
                delete_column=(spec.delete_column, spec.delete_value),
                prune_columns=spec.prune_columns,
                commit=request.commit,
            )
        return merge_upsert(
            request.target,
            batch.dedupe_result() if spec.dedupe else batch.rows,
            spec.natural_key,
            version_column=spec.version_column,
            partition_column=spec.partition_column,
            prune_columns=spec.prune_columns,
            commit=request.commit.with_fingerprint(batch.fingerprint),
        )

    def write_spark(
        self, request: WriteRequest, frame: Any, schema: pa.Schema
    ) -> tuple[WriteResult, int, int]:
        """The executors stage the winners; the driver MERGEs them in one commit."""
        from idem_assets.spark import merge_partitions_spark

        spec = self.spec
        if not spec.version_column:
            raise ValueError("merge on Spark needs a version column")
        result = merge_partitions_spark(
            request.target,
            frame,
            list(spec.natural_key),
            spec.version_column,
            spec.partition_column,
            schema=schema,
            commit=request.commit,
            delete_column=(
                (spec.delete_column, spec.delete_value) if spec.delete_column is not None else None
            ),
        )
        details = result.details or {}
        return (
            result,
            int(details.get("duplicates_dropped", 0)),
            int(details.get("conflicting_keys", 0)),
        )

    def compare(self, target: LakeTable, batch: PreparedBatch, window: Window) -> RerunComparison:
        """Whether a rerun's MERGE would insert or update any row (or delete one)."""
        plan = self._plan(target, batch)
        upserts = plan.upserts
        return RerunComparison(
            passed=plan.changes == 0,
            rows_differing=plan.changes,
            expected=batch.fingerprint,
            stored=fingerprint(upserts.current),
            detail=self._detail(upserts.inserts, upserts.updates, plan.deletes.height),
        )

    def compare_days(
        self, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """One merge plan for all the days, each change counted on the day of the batch row
        that makes it (a delete on the day of its delete row)."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        spec = self.spec
        column, key = spec.partition_column or "", list(spec.natural_key)
        plan = self._plan(target, batch)
        upserts = plan.upserts
        stored_keys = pl.from_arrow(upserts.current.select(key)).unique()
        assert isinstance(stored_keys, pl.DataFrame)
        updated = upserts.winners.join(
            stored_keys.with_columns(pl.lit(True).alias("__stored")), on=key, how="left"
        ).select(column, pl.col("__stored").fill_null(False).alias("__stored"))
        changed = [updated.with_columns(pl.lit(False).alias("__deleted"))]
        if plan.deletes.height:
            assert spec.version_column is not None
            rows = pl.from_arrow(batch.rows.select([*key, spec.version_column, column]))
            assert isinstance(rows, pl.DataFrame)
            deleted = plan.deletes.join(rows.unique(), on=[*key, spec.version_column])
            changed.append(
                deleted.select(column).with_columns(
                    pl.lit(True).alias("__stored"), pl.lit(True).alias("__deleted")
                )
            )
        counts = {
            row[column]: (row["changes"], row["updates"], row["deletes"])
            for row in pl.concat(changed)
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
            changes, updates, deletes = counts.get(day, (0, 0, 0))
            out.append(
                RerunComparison(
                    passed=changes == 0,
                    rows_differing=changes,
                    expected=expected_by.get(day, EMPTY_FINGERPRINT),
                    stored=stored_by.get(day, EMPTY_FINGERPRINT),
                    detail=self._detail(changes - updates - deletes, updates, deletes),
                )
            )
        return out

    def _plan(self, target: LakeTable, batch: PreparedBatch) -> ChangePlan:
        """What a rerun's MERGE of the batch would change: its upserts, and with a delete
        marker its deletes (against the kept tombstones)."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        spec = self.spec
        table = target.open()
        if spec.delete_column is None:
            upserts = plan_merge(
                table, batch.rows, spec.natural_key, spec.version_column, spec.prune_columns
            )
            return ChangePlan(upserts, pl.DataFrame())
        assert spec.version_column is not None
        stones = Tombstones.beside(target, spec.natural_key, spec.version_column)
        marker = (spec.delete_column, spec.delete_value)
        kept = tombstones_of(
            batch.rows, spec.natural_key, spec.version_column, marker, stones.read()
        )
        return plan_changes(
            table,
            batch.rows,
            spec.natural_key,
            spec.version_column,
            marker,
            kept,
            spec.prune_columns,
        )

    def _detail(self, inserts: int, updates: int, deletes: int) -> str:
        """What a rerun would change, in the words of the spec (with deletes or without)."""
        if self.spec.delete_column is None:
            if inserts or updates:
                return f"a rerun would insert {inserts} and update {updates} row(s)"
            return "every batch row is stored or superseded by a newer version"
        if inserts or updates or deletes:
            return f"a rerun would insert {inserts}, update {updates} and delete {deletes} row(s)"
        return "every batch row is stored, deleted or superseded by a newer version"
