"""A write strategy bound to its settings: what one output's write covers, touches, writes
and compares.

Every write the IO manager makes, whether asked for by ``idem/strategy`` or by one of
dagster-delta's modes, is one ``WriteStrategy`` object made for that output (see
``writes.strategy_for``). Before the claim the strategy prepares the output
(``prepare_output``: erased rows out, a table deduplicated and its fingerprint started, a
bad output refused); under the claim it writes it (``write_prepared``: the one place that
chooses between ``write``, ``write_stream`` and ``write_spark``). Nothing else in the IO
manager knows how a kind of write or a kind of rows works.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from idem_assets.io_manager.batch import PreparedBatch, prepare
from idem_assets.io_manager.delta_modes import tables_only
from idem_assets.io_manager.erasure import Filtered, erased_for, without_erased
from idem_assets.io_manager.metadata import RowCounts
from idem_assets.io_manager.noop import same_content
from idem_assets.io_manager.output import TableOutput, is_spark_frame, is_stream
from idem_assets.io_manager.slices import PartitionSlice, partitions_label
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes.rerun_equality import RerunComparison, compared, day_batch
from idem_assets.lake import (
    Commit,
    Fingerprint,
    LakeTable,
    Proof,
    WriteOptions,
    WriteResult,
    fingerprint,
    read_rows,
)

if TYPE_CHECKING:
    import dagster as dg
    import pyarrow as pa

    from idem_assets.checkpoint import CheckpointStore
    from idem_assets.io_manager.delta_modes import ModeWrite
    from idem_assets.io_manager.tracking import SettledWrite
    from idem_assets.lake.predicates import Condition


@dataclass(frozen=True)
class WriteRequest:
    """Everything one write needs besides its rows, as the manager resolved it."""

    asset: str  # the output's table name in the lake (its write records' scope)
    target: LakeTable
    covered: PartitionSlice
    # The write's metadata and options; each strategy adds the rows' fingerprint it has.
    commit: Commit
    settled: SettledWrite | None
    # The fingerprint of the rows taken out of the output because they hold an erased key
    # (None: none were).
    erased_rows: Fingerprint | None = None

    def given(self, content: Fingerprint) -> Fingerprint:
        """The output as the asset gave it, from the fingerprint of the rows written: the
        same before and after a key it holds is erased."""
        return content.plus(self.erased_rows) if self.erased_rows is not None else content


@dataclass(frozen=True)
class Written:
    """A write's outcome, as the manager settles and reports it."""

    result: WriteResult
    touched: list[Condition]  # the part of the table the write could change (signed)
    counts: RowCounts


@dataclass(frozen=True)
class TableRows:
    """A table (Arrow, pandas, polars, or a stream read whole): prepared on the driver."""

    batch: PreparedBatch


@dataclass(frozen=True)
class StreamRows:
    """A ``pa.RecordBatchReader`` over date partitions, written as it arrives."""

    batches: pa.RecordBatchReader
    schema: pa.Schema | None


@dataclass(frozen=True)
class SparkRows:
    """A Spark DataFrame: executors write the files, delta-rs commits."""

    frame: Any
    schema: pa.Schema


@dataclass(frozen=True)
class PreparedOutput:
    """An output ready to be written once its record is claimed."""

    rows: TableRows | StreamRows | SparkRows
    filtered: Filtered  # what the erasure filter took out of the asset's output

    @property
    def engine(self) -> str | None:
        """The engine reported in the write's metadata (``spark``; None: delta-rs)."""
        return "spark" if isinstance(self.rows, SparkRows) else None


class WriteStrategy(ABC):
    """One output's idempotent write: its slice, the part it touches, its write, its check.

    ``name`` is the strategy's key in ``writes.STRATEGIES`` and the ``lake`` module it
    writes with; ``label`` is what the output's metadata and log call it.
    """

    name: ClassVar[str]
    # The metadata key that names the write: "strategy" (idem/strategy) or "mode".
    reported_as: ClassVar[str] = "strategy"
    # Whether ``write_spark`` writes a Spark DataFrame (else it is refused before the claim).
    on_spark: ClassVar[bool] = False

    @property
    @abstractmethod
    def label(self) -> str:
        """The write as the asset asked for it (``overwrite``, ``append``, ``error``...)."""

    def covers(
        self, context: dg.OutputContext | dg.InputContext, schema: pa.Schema | None
    ) -> PartitionSlice:
        """What an output's write covers. Here the partitions only name the record: the
        strategy itself decides which rows it changes."""
        if not context.has_asset_partitions:
            return PartitionSlice.whole_table()
        label, days = partitions_label(context)
        return PartitionSlice((), (), label, days)

    @abstractmethod
    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The part of the table a write of ``batch`` can change; its files are signed.

        ``batch`` is None when the rows never reach the driver (a stream, a Spark frame).
        """

    def streams(self, window: Window) -> bool:
        """Whether a record-batch stream can be written as it arrives, in flat memory."""
        return False

    def options(self, configured: WriteOptions) -> WriteOptions:
        """How files are written and a table created, from the manager's configuration."""
        return configured

    def record_key(self, content: Fingerprint) -> str:
        """What a settled record must hold to vouch that a write of ``content`` is done."""
        return str(content)

    @property
    def erasable_keys(self) -> tuple[str, ...]:
        """The columns whose erased keys are kept out of every write (none here)."""
        return ()

    def without_erased(self, output: TableOutput, store: CheckpointStore) -> Filtered:
        """The output without the rows of erased keys of ``erasable_keys``, and what was
        taken out: every write, whatever asked for it, filters here."""
        return without_erased(output, erased_for(self.erasable_keys, store))

    # --- preparing, before the claim ---------------------------------------------------

    def prepare_output(
        self, output: TableOutput, covered: PartitionSlice, store: CheckpointStore
    ) -> PreparedOutput:
        """The output ready to write: erased rows out, then a table prepared (``prepare``),
        a stream kept as it is when ``streams`` can write it as it arrives (else read whole),
        a Spark DataFrame checked. A bad output fails here, before any claim."""
        filtered = self.without_erased(output, store)
        kept = filtered.output
        rows: TableRows | StreamRows | SparkRows
        if is_spark_frame(kept.rows):
            if not self.on_spark:
                raise ValueError(self.local_only())
            if kept.schema is None:
                raise ValueError("a Spark output needs the table schema (TableOutput(schema=...))")
            rows = SparkRows(kept.rows, kept.schema)
        elif is_stream(kept.rows) and self.streams(covered.window):
            rows = StreamRows(kept.rows, kept.schema)  # type: ignore[arg-type]
        else:
            table = kept.whole().rows if is_stream(kept.rows) else kept.rows
            rows = TableRows(self.prepare(table))  # type: ignore[arg-type]
        return PreparedOutput(rows, filtered)

    def prepare(self, rows: pa.Table) -> PreparedBatch:
        """A table's rows ready to write; a bad batch fails here, before any claim."""
        return PreparedBatch.of(rows)

    def local_only(self) -> str:
        """Why this strategy refuses a Spark DataFrame (see ``on_spark``)."""
        return f"strategy {self.label!r} runs on the local engine only"

    # --- writing, under the claim -------------------------------------------------------

    def write_prepared(self, request: WriteRequest, prepared: PreparedOutput) -> Written:
        """Write a prepared output by the method its rows need, and count what was written."""
        match prepared.rows:
            case TableRows(batch):
                result = self.write(request, batch)
                counts = RowCounts(
                    batch.rows.num_rows,
                    batch.duplicates_dropped,
                    input_rows=batch.input_rows,
                    conflicting_keys=batch.conflicting_keys,
                    streamed=False,
                )
                return Written(result, self.touched(request.covered, batch), counts)
            case StreamRows(batches, schema):
                result = self.write_stream(request, batches, schema)
                rows = result.fingerprint.rows
                counts = RowCounts(rows, 0, input_rows=rows, conflicting_keys=0, streamed=True)
            case SparkRows(frame, schema):
                result, dropped, conflicts = self.write_spark(request, frame, schema)
                counts = RowCounts(result.fingerprint.rows, dropped, conflicting_keys=conflicts)
        return Written(result, self.touched(request.covered, None), counts)

    def write(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """Write a prepared batch; a no-op when nothing changed.

        With ``request.settled`` (the slice's last settled write), a batch with the same
        fingerprint over a slice whose files have not changed since is a proven no-op,
        decided from table metadata without reading any data.
        """
        if request.settled is not None:
            table = request.target.open()
            content = batch.fingerprint
            touched = self.touched(request.covered, batch)
            if table is not None and same_content(
                request.settled, table, self.record_key(content), touched
            ):
                return WriteResult.unchanged(
                    self.label,
                    request.target.uri,
                    table.version(),
                    content,
                    proof=Proof.CHECKPOINT,
                    details={"record": request.settled.record_id},
                )
        return self.write_rows(request, batch)

    @abstractmethod
    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """The strategy's own write (it still commits nothing when the table holds the rows)."""

    def write_stream(
        self, request: WriteRequest, batches: pa.RecordBatchReader, schema: pa.Schema | None
    ) -> WriteResult:
        """Write a record-batch stream as it arrives (when ``streams`` says it can)."""
        raise ValueError(f"strategy {self.label!r} does not write streams")

    def write_spark(
        self, request: WriteRequest, frame: Any, schema: pa.Schema
    ) -> tuple[WriteResult, int, int]:
        """Write a Spark DataFrame: the result, duplicates dropped and conflicting keys."""
        raise ValueError(self.local_only())

    # --- comparing, for the rerun-equality check ---------------------------------------

    def compare(self, target: LakeTable, batch: PreparedBatch, window: Window) -> RerunComparison:
        """Compare a recomputed batch with what the table holds, without writing."""
        raise ValueError(f"strategy {self.label!r} has no rerun comparison")

    def compare_days(
        self, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """``compare`` for each of ``days`` (adjacent), from a batch recomputed for all."""
        raise ValueError(f"strategy {self.label!r} has no rerun comparison")


class SpecStrategy(WriteStrategy):
    """A strategy an asset asks for with ``idem/strategy``, bound to its ``WriteSpec``."""

    def __init__(self, spec: WriteSpec) -> None:
        self.spec = spec

    @property
    def label(self) -> str:
        """The spec's strategy."""
        return self.spec.strategy

    def options(self, configured: WriteOptions) -> WriteOptions:
        """The manager's options; a change feed keyed by the natural key."""
        return dataclasses.replace(configured, change_key=self.spec.natural_key)

    @property
    def erasable_keys(self) -> tuple[str, ...]:
        """The spec's erasable columns."""
        return self.spec.erasable_keys

    def prepare(self, rows: pa.Table) -> PreparedBatch:
        """Deduplicated per the spec; the fingerprint starts hashing on another thread."""
        return prepare(self.spec, rows)

    def window_slice(self, window: Window) -> PartitionSlice:
        """The slice of a daily window on the spec's partition column (whole table without)."""
        return window_slice(self.spec, window)

    def compare(self, target: LakeTable, batch: PreparedBatch, window: Window) -> RerunComparison:
        """The stored rows of what the write touches, fingerprinted against the batch's."""
        ranges = self.touched(self.window_slice(window), None)
        stored_rows = read_rows(target.open(), batch.rows.schema, ranges=ranges)
        return compared(
            window, batch.fingerprint, fingerprint(stored_rows), lambda: (batch.rows, stored_rows)
        )

    def compare_days(
        self, target: LakeTable, batch: PreparedBatch, days: Sequence[dt.date]
    ) -> list[RerunComparison]:
        """``compare`` for each of ``days`` (adjacent), from a batch recomputed for all of
        them."""
        column = self.spec.partition_column or ""
        return [
            self.compare(target, day_batch(batch, column, day), Window.day(day)) for day in days
        ]


def window_slice(spec: WriteSpec, window: Window) -> PartitionSlice:
    """The slice of a daily window on the spec's partition column (whole table without)."""
    if window.partitioned and spec.partition_column:
        return PartitionSlice.of_window(spec.partition_column, window)
    return PartitionSlice((), (), window.record_key(), window)


class ModeStrategy(WriteStrategy):
    """A write in one of dagster-delta's modes (merge, append, error, ignore), bound to
    the ``ModeWrite`` the manager resolved from the output's settings.

    Its record key is the rows' fingerprint with the mode's configuration, so a rerun
    under another merge predicate is not vouched for by the last one.
    """

    reported_as = "mode"

    def __init__(self, plan: ModeWrite, covered: PartitionSlice) -> None:
        self.plan = plan
        self.covered = covered

    @property
    def label(self) -> str:
        """The mode."""
        return self.plan.mode

    def covers(
        self, context: dg.OutputContext | dg.InputContext, schema: pa.Schema | None
    ) -> PartitionSlice:
        """The output's partitions, as the mode's settings resolved them."""
        return self.covered

    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The output's partitions (a merge's scope, the files an append's proof signs)."""
        return list(self.plan.scope)

    def options(self, configured: WriteOptions) -> WriteOptions:
        """The mode's own: its writer properties, table configuration and schema mode."""
        return self.plan.options()

    @property
    def erasable_keys(self) -> tuple[str, ...]:
        """The output's ``idem/erasable_keys``."""
        return self.plan.erasable_keys

    def record_key(self, content: Fingerprint) -> str:
        """The rows' fingerprint with the mode's configuration."""
        return self.plan.proof_key(content)

    def local_only(self) -> str:
        """Modes write tables on the driver."""
        return tables_only(self.plan.mode)
