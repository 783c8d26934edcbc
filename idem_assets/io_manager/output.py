"""What an asset may hand the IO manager besides a bare frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.lake.frames import FrameLike, is_writable, to_arrow, unsupported

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


@dataclass(frozen=True)
class TableOutput:
    """An asset's rows plus the signature of the inputs they were computed from.

    With ``rows=None`` the asset says: my inputs have the signature of the last settled
    write of this window, so the table already holds my output. The IO manager accepts
    that only if the slice's data files are still the ones that write left behind.
    """

    rows: FrameLike | None
    input_signature: str | None = None
    # The table schema, needed when rows are a Spark DataFrame written by executors.
    schema: pa.Schema | None = None

    @property
    def unchanged(self) -> bool:
        """Whether the asset skipped computing because its inputs did not change."""
        return self.rows is None

    @classmethod
    def unchanged_inputs(cls, input_signature: str) -> TableOutput:
        """The output of an asset whose inputs match the last settled write."""
        return cls(rows=None, input_signature=input_signature)

    @classmethod
    def handed_over(cls, obj: object) -> TableOutput:
        """What an asset returned, as the writes take it: frames (pandas, polars) as Arrow
        tables, streams and Spark DataFrames as they are; anything else is refused with the
        types that are accepted."""
        output = obj if isinstance(obj, TableOutput) else cls(obj)  # type: ignore[arg-type]
        rows = output.rows
        if rows is None or is_spark_frame(rows) or is_stream(rows):
            return output
        if not is_writable(rows):
            raise unsupported(type(rows))
        return output.whole()

    def whole(self) -> TableOutput:
        """The output with its rows as one Arrow table (a stream is read to its end)."""
        assert self.rows is not None
        return TableOutput(to_arrow(self.rows), self.input_signature, self.schema)


class StaleSkipError(RuntimeError):
    """An asset skipped on unchanged inputs, but the table slice moved in the meantime."""


class UnsettledWriteError(RuntimeError):
    """A write committed, but its checkpoint record could not be settled: the next run of
    the window finds the commit by its lease token and records it (reconciliation)."""


def is_spark_frame(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (checked without importing pyspark)."""
    return type(obj).__module__.startswith("pyspark.sql")


def is_stream(obj: object) -> bool:
    """Whether ``obj`` is a record-batch stream (checked without importing pyarrow)."""
    return type(obj).__name__ == "RecordBatchReader" and type(obj).__module__.startswith("pyarrow")
