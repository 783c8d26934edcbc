"""One handler per kind of output: tables (Arrow, pandas, polars), record-batch streams, Spark.

A handler is what dagster-deltalake calls a type handler: it turns an asset's rows into a
``PreparedOutput`` before anything is claimed (a table is deduplicated and its fingerprint
started there), then, while the manager holds the claim, hands them to the output's
strategy in the form that strategy writes (``write``, ``write_stream``, ``write_spark``).
What comes back (``Written``) is all the manager needs to settle the record and report.
The manager itself tests no engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.metadata import RowCounts
from idem_assets.io_manager.output import TableOutput, is_spark_frame, is_stream
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.writes import WriteRequest, WriteStrategy, Written
from idem_assets.lake.frames import is_writable, to_arrow, unsupported

if TYPE_CHECKING:
    import pyarrow as pa


class PreparedOutput(ABC):
    """An output ready to be written, once the manager has claimed its record."""

    @abstractmethod
    def write(self, strategy: WriteStrategy, request: WriteRequest) -> Written:
        """Write with ``strategy`` (or prove the write a no-op)."""


class OutputHandler(ABC):
    """How one kind of output reaches a Delta table."""

    engine: ClassVar[str | None] = None  # reported as the write's ``engine`` metadata when set

    @abstractmethod
    def prepare(self, strategy: WriteStrategy, output: TableOutput) -> PreparedOutput:
        """The output ready to write; a bad output fails here, before any claim."""


class TableHandler(OutputHandler):
    """Arrow, pandas and polars frames: prepared (deduplicated) and fingerprinted on the
    driver."""

    def prepare(self, strategy: WriteStrategy, output: TableOutput) -> PreparedOutput:
        """The strategy's batch; its fingerprint starts hashing on another thread."""
        assert output.rows is not None
        return _PreparedTable(strategy.prepare(output.rows))


@dataclass(frozen=True)
class _PreparedTable(PreparedOutput):
    batch: PreparedBatch

    def write(self, strategy: WriteStrategy, request: WriteRequest) -> Written:
        batch = self.batch
        result = strategy.write(request, batch)
        counts = RowCounts(
            batch.rows.num_rows,
            batch.duplicates_dropped,
            input_rows=batch.input_rows,
            conflicting_keys=batch.conflicting_keys,
            streamed=False,
        )
        return Written(result, strategy.touched(request.covered, batch), counts)


class StreamHandler(OutputHandler):
    """A ``pa.RecordBatchReader`` over date partitions: written as it arrives."""

    def prepare(self, strategy: WriteStrategy, output: TableOutput) -> PreparedOutput:
        """Nothing to do before the claim: the stream is read while it is written."""
        assert output.rows is not None
        return _PreparedStream(output.rows, output.schema)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _PreparedStream(PreparedOutput):
    batches: pa.RecordBatchReader
    schema: pa.Schema | None

    def write(self, strategy: WriteStrategy, request: WriteRequest) -> Written:
        result = strategy.write_stream(request, self.batches, self.schema)
        rows = result.fingerprint.rows
        counts = RowCounts(rows, 0, input_rows=rows, conflicting_keys=0, streamed=True)
        return Written(result, strategy.touched(request.covered, None), counts)


class SparkHandler(OutputHandler):
    """A Spark DataFrame: executors write the files, delta-rs commits (no rows on the driver)."""

    engine: ClassVar[str | None] = "spark"

    def prepare(self, strategy: WriteStrategy, output: TableOutput) -> PreparedOutput:
        """Refuse what Spark cannot write before anything is claimed."""
        if not strategy.on_spark:
            raise ValueError(strategy.local_only())
        if output.schema is None:
            raise ValueError("a Spark output needs the table schema (TableOutput(schema=...))")
        return _PreparedSpark(output.rows, output.schema)


@dataclass(frozen=True)
class _PreparedSpark(PreparedOutput):
    frame: Any
    schema: pa.Schema

    def write(self, strategy: WriteStrategy, request: WriteRequest) -> Written:
        result, dropped, conflicts = strategy.write_spark(request, self.frame, self.schema)
        rows = result.fingerprint.rows
        counts = RowCounts(rows, dropped, conflicting_keys=conflicts)
        return Written(result, strategy.touched(request.covered, None), counts)


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
    strategy: WriteStrategy, output: TableOutput, covered: PartitionSlice
) -> tuple[OutputHandler, TableOutput]:
    """The handler that writes ``output`` (handed over), and the output it writes.

    A stream the strategy cannot write as it arrives (one to deduplicate, merge or write to
    anything but date partitions) is read whole here and written like a table.
    """
    rows = output.rows
    if is_spark_frame(rows):
        return SparkHandler(), output
    if is_stream(rows) and not strategy.streams(covered.window):
        return TableHandler(), _whole(output)
    return (StreamHandler() if is_stream(rows) else TableHandler()), output


def _whole(output: TableOutput) -> TableOutput:
    assert output.rows is not None
    return TableOutput(to_arrow(output.rows), output.input_signature, output.schema)
