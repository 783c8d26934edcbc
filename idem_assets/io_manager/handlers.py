"""One handler per kind of output: tables (Arrow, pandas, polars), record-batch streams, Spark.

A handler turns an asset's rows into a ``PreparedOutput`` before anything is claimed (a
table is deduplicated and its fingerprint started there), then writes it with the
strategy while the manager holds the claim. What comes back (``Written``) is all the
manager needs to settle the record and report: the result, the part of the table the
write could touch, and the row counts. The manager itself tests no engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from idem_assets.io_manager.batch import PreparedBatch, prepare
from idem_assets.io_manager.metadata import RowCounts
from idem_assets.io_manager.noop import same_content
from idem_assets.io_manager.output import TableOutput
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.strategies import WriteStrategy
from idem_assets.lake import Fingerprint, LakeTable, WriteOptions, WriteResult, overwrite_stream
from idem_assets.lake.frames import is_writable, to_arrow, unsupported
from idem_assets.lake.predicates import Condition

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from idem_assets.io_manager.tracking import SettledWrite


@dataclass(frozen=True)
class WriteRequest:
    """Everything one write needs besides its rows, as the manager resolved it."""

    spec: WriteSpec
    strategy: WriteStrategy
    target: LakeTable
    covered: PartitionSlice
    commit_metadata: Mapping[str, Any]
    settled: SettledWrite | None
    options: WriteOptions


@dataclass(frozen=True)
class Written:
    """A write's outcome, as the manager settles and reports it."""

    result: WriteResult
    touched: list[Condition]  # the part of the table the write could change (signed)
    counts: RowCounts
    columns: pa.Schema | None = None  # the columns written, when the driver saw them


class PreparedOutput(ABC):
    """An output ready to be written, once the manager has claimed its record."""

    @abstractmethod
    def write(self, request: WriteRequest) -> Written:
        """Write with the request's strategy (or prove the write a no-op)."""


class OutputHandler(ABC):
    """How one kind of output reaches a Delta table."""

    engine: ClassVar[str | None] = None  # reported as the write's ``engine`` metadata when set

    @abstractmethod
    def prepare(self, spec: WriteSpec, output: TableOutput) -> PreparedOutput:
        """The output ready to write; a bad output fails here, before any claim."""


class TableHandler(OutputHandler):
    """Arrow, pandas and polars frames: deduplicated and fingerprinted on the driver."""

    def prepare(self, spec: WriteSpec, output: TableOutput) -> PreparedOutput:
        """Deduplicate per the spec; the fingerprint starts hashing on another thread."""
        assert output.rows is not None
        return _PreparedTable(prepare(spec, output.rows))


@dataclass(frozen=True)
class _PreparedTable(PreparedOutput):
    batch: PreparedBatch

    def write(self, request: WriteRequest) -> Written:
        strategy, batch = request.strategy, self.batch
        result = strategy.write(
            request.spec,
            request.target,
            batch,
            request.covered,
            request.commit_metadata,
            settled=request.settled,
            options=request.options,
        )
        counts = RowCounts(
            batch.rows.num_rows,
            batch.duplicates_dropped,
            input_rows=batch.input_rows,
            conflicting_keys=batch.conflicting_keys,
            streamed=False,
        )
        touched = strategy.touched(request.spec, request.covered, batch)
        return Written(result, touched, counts, batch.rows.schema)


class StreamHandler(OutputHandler):
    """A ``pa.RecordBatchReader`` over date partitions: written as it arrives."""

    def prepare(self, spec: WriteSpec, output: TableOutput) -> PreparedOutput:
        """Nothing to do before the claim: the stream is read while it is written."""
        assert output.rows is not None
        return _PreparedStream(output.rows, output.schema)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _PreparedStream(PreparedOutput):
    batches: pa.RecordBatchReader
    schema: pa.Schema | None

    def write(self, request: WriteRequest) -> Written:
        touched = request.strategy.touched(request.spec, request.covered, None)
        window = request.covered.window
        assert window.start is not None and window.end is not None

        def unchanged(table: DeltaTable, new: Fingerprint) -> bool:
            return same_content(request.settled, table, new, touched)

        result = overwrite_stream(
            request.target,
            self.batches,
            request.spec.partition_column or "",
            window.start,
            window.end,
            schema=self.schema,
            commit_metadata=request.commit_metadata,
            unchanged=unchanged,
        )
        rows = result.fingerprint.rows
        counts = RowCounts(rows, 0, input_rows=rows, conflicting_keys=0, streamed=True)
        return Written(result, touched, counts)


class SparkHandler(OutputHandler):
    """A Spark DataFrame: executors write the files, delta-rs commits (no rows on the driver)."""

    engine: ClassVar[str | None] = "spark"

    def prepare(self, spec: WriteSpec, output: TableOutput) -> PreparedOutput:
        """Refuse what Spark cannot write before anything is claimed."""
        if output.schema is None:
            raise ValueError("a Spark output needs the table schema (TableOutput(schema=...))")
        if spec.strategy not in _SPARK_WRITERS:
            raise ValueError(f"strategy {spec.strategy!r} runs on the local engine only")
        return _PreparedSpark(output.rows, output.schema)


@dataclass(frozen=True)
class _PreparedSpark(PreparedOutput):
    frame: Any
    schema: pa.Schema

    def write(self, request: WriteRequest) -> Written:
        result, dropped, conflicts = _SPARK_WRITERS[request.spec.strategy](
            request, self.frame, self.schema
        )
        touched = request.strategy.touched(request.spec, request.covered, None)
        rows = result.fingerprint.rows
        return Written(result, touched, RowCounts(rows, dropped, conflicting_keys=conflicts))


def _overwrite_spark(
    request: WriteRequest, frame: Any, schema: pa.Schema
) -> tuple[WriteResult, int, int]:
    from idem_assets.spark import dedupe_newest_spark, overwrite_partitions_spark

    spec, window = request.spec, request.covered.window
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
        commit_metadata=request.commit_metadata,
        cluster_by=spec.natural_key,
    )
    return result, dropped, conflicts


def _merge_spark(
    request: WriteRequest, frame: Any, schema: pa.Schema
) -> tuple[WriteResult, int, int]:
    from idem_assets.spark import merge_partitions_spark

    spec = request.spec
    if not spec.version_column:
        raise ValueError("merge on Spark needs a version column")
    result = merge_partitions_spark(
        request.target,
        frame,
        list(spec.natural_key),
        spec.version_column,
        spec.partition_column,
        schema=schema,
        commit_metadata=request.commit_metadata,
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


def _history_spark(
    request: WriteRequest, frame: Any, schema: pa.Schema
) -> tuple[WriteResult, int, int]:
    """A history's change set, read by the executors, is planned and merged by the driver:
    a day's change set is small, and its keys' stored histories are read by key."""
    from idem_assets.spark.schema import conform_spark

    spec = request.spec
    assert spec.version_column is not None
    rows = conform_spark(frame, schema).toArrow()
    result = request.strategy.write_rows(
        spec,
        request.target,
        prepare(spec, rows, schema),
        request.covered,
        request.commit_metadata,
        request.options,
    )
    return result, 0, 0


# The strategies Spark writes, and how; any other runs on the local engine.
_SPARK_WRITERS = {"overwrite": _overwrite_spark, "merge": _merge_spark, "history": _history_spark}


def is_spark_frame(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (checked without importing pyspark)."""
    return type(obj).__module__.startswith("pyspark.sql")


def is_stream(obj: object) -> bool:
    """Whether ``obj`` is a record-batch stream (checked without importing pyarrow)."""
    return type(obj).__name__ == "RecordBatchReader" and type(obj).__module__.startswith("pyarrow")


def handed_over(output: TableOutput) -> TableOutput:
    """The output as the handlers take it: frames as Arrow tables, streams and Spark as they
    are; anything else is refused with the types that are accepted."""
    rows = output.rows
    if rows is None or is_spark_frame(rows) or is_stream(rows):
        return output
    if not is_writable(rows):
        raise unsupported(type(rows))
    return _whole(output)


def handler_for(
    spec: WriteSpec, strategy: WriteStrategy, output: TableOutput, covered: PartitionSlice
) -> tuple[OutputHandler, TableOutput]:
    """The handler that writes ``output`` (handed over), and the output it writes.

    A stream the strategy cannot write as it arrives (one to deduplicate, merge or write to
    anything but date partitions) is read whole here and written like a table.
    """
    rows = output.rows
    if is_spark_frame(rows):
        return SparkHandler(), output
    if is_stream(rows) and not strategy.streams(spec, covered.window):
        return TableHandler(), _whole(output)
    return (StreamHandler() if is_stream(rows) else TableHandler()), output


def _whole(output: TableOutput) -> TableOutput:
    assert output.rows is not None
    return TableOutput(to_arrow(output.rows), output.input_signature, output.schema)
