"""``idem/strategy: overwrite`` (and dagster-delta's mode ``overwrite``): replace exactly
the output's partitions in one commit, with ``lake.overwrite`` (replaceWhere)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.noop import same_content
from idem_assets.io_manager.slices import PartitionSlice, arrow_type_of, partition_slice
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes.rerun_equality import RerunComparison, compared, day_rows
from idem_assets.io_manager.writes.strategy import SpecStrategy, WriteRequest
from idem_assets.lake import LakeTable, WriteResult, date_range, read_rows
from idem_assets.lake.fingerprint import EMPTY_FINGERPRINT, fingerprints_by
from idem_assets.lake.overwrite import overwrite_slice, overwrite_stream

if TYPE_CHECKING:
    import dagster as dg
    import pyarrow as pa
    from deltalake import DeltaTable

    from idem_assets.lake import Fingerprint
    from idem_assets.lake.predicates import Condition


class Overwrite(SpecStrategy):
    """Replace exactly the output's partitions (replaceWhere) in one commit."""

    name = "overwrite"
    on_spark = True

    def covers(
        self, context: dg.OutputContext | dg.InputContext, schema: pa.Schema | None
    ) -> PartitionSlice:
        """Exactly the run's partitions of the partition column(s)."""
        if not context.has_asset_partitions:
            return PartitionSlice.whole_table()
        return partition_slice(context, self.spec.partition_columns, arrow_type_of(schema))

    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The covered partitions (or the window's days of the partition column)."""
        if covered.conditions:
            return list(covered.conditions)
        start, end = self._days(covered.window)
        return [date_range(self.spec.partition_column or "", start, end)]

    def streams(self, window: Window) -> bool:
        """Date partitions without deduplication: anything else needs the whole batch."""
        spec = self.spec
        return (
            window.partitioned
            and spec.partition_column is not None
            and not spec.partition_expr
            and not (spec.dedupe and spec.natural_key)
        )

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """replaceWhere of the covered partitions, laid out by the partition column(s)."""
        covered = request.covered
        partition_by = covered.partition_by if covered.conditions else (self.spec.partition_column,)
        return overwrite_slice(
            request.target,
            batch.rows,
            self.touched(covered, batch),
            partition_by=[c for c in partition_by if c],
            commit=request.commit.with_fingerprint(batch.fingerprint_job),
        )

    def write_stream(
        self, request: WriteRequest, batches: pa.RecordBatchReader, schema: pa.Schema | None
    ) -> WriteResult:
        """The stream's days replaced as the batches arrive (flat memory)."""
        touched = self.touched(request.covered, None)
        start, end = self._days(request.covered.window)

        def unchanged(table: DeltaTable, new: Fingerprint) -> bool:
            return same_content(request.settled, table, self.record_key(new), touched)

        return overwrite_stream(
            request.target,
            batches,
            self.spec.partition_column or "",
            start,
            end,
            schema=schema,
            commit=request.commit,
            unchanged=unchanged,
        )

    def write_spark(
        self, request: WriteRequest, frame: Any, schema: pa.Schema
    ) -> tuple[WriteResult, int, int]:
        """The executors deduplicate and write the window's files; one commit replaces it."""
        from idem_assets.spark import dedupe_newest_spark, overwrite_partitions_spark

        spec, window = self.spec, request.covered.window
        if window.start is None or window.end is None or not spec.partition_column:
            raise ValueError("overwrite on Spark needs a partitioned asset")
        dropped = conflicts = 0
        if spec.dedupe and spec.natural_key:
            deduped = dedupe_newest_spark(frame, list(spec.natural_key), spec.version_column)
            frame, dropped, conflicts = (
                deduped.rows,
                deduped.duplicates_dropped,
                deduped.conflicting_keys,
            )
        result = overwrite_partitions_spark(
            request.target,
            frame,
            spec.partition_column,
            window.start,
            window.end,
            schema=schema,
            commit=request.commit,
            cluster_by=spec.natural_key,
        )
        return result, dropped, conflicts

    def compare_days(
        self, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """The stored days read once and fingerprinted day by day against the batch's."""
        column = self.spec.partition_column or ""
        span = Window(min(days), max(days) + dt.timedelta(days=1))
        ranges = self.touched(self.window_slice(span), None)
        stored_rows = read_rows(target.open(), batch.rows.schema, ranges=ranges)
        expected_by = fingerprints_by(batch.rows, column)
        stored_by = fingerprints_by(stored_rows, column)
        return [
            compared(
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

    def _days(self, window: Window) -> tuple[dt.date, dt.date]:
        if not window.partitioned:
            raise ValueError(f"strategy {self.label!r} needs a partitioned asset")
        assert window.start is not None and window.end is not None
        return window.start, window.end
