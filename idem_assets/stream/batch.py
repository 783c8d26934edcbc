"""Building a batch's rows from its files, and the Delta commits that carry it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.lake import Fingerprint, fingerprint
from idem_assets.lake.delta_log import commit_infos
from idem_assets.lake.erasure import Erased
from idem_assets.lake.frames import conform
from idem_assets.landing.erasure import quarantine_without_erased
from idem_assets.landing.normalise import quarantine_schema
from idem_assets.stream.files import FileRead
from idem_assets.stream.offsets import BatchPlan
from idem_assets.stream.source import SOURCE_FILE_COLUMN, STREAM_BATCH_COLUMN, StreamSource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


# Commit metadata that lets a restart recognise a batch's commit in the table history.
META_STREAM = "idem.stream"
META_BATCH = "idem.stream.batch"
META_SIGNATURE = "idem.stream.signature"
META_QUARANTINED = "idem.stream.quarantined"
META_ABANDONED = "idem.stream.abandoned"
META_FINGERPRINT = "idem.fingerprint"
# How far back in the table history a restart looks for the commit of the batch it resumes.
HISTORY_LOOKBACK = 100


@dataclass(frozen=True)
class BuiltBatch:
    """A batch's rows, ready to commit, with its row accounting."""

    plan: BatchPlan
    rows: pa.Table  # stream schema, in plan order then file row order
    quarantine: pa.Table  # quarantine_schema()
    raw_rows: int
    fingerprint: Fingerprint
    erased: int = 0  # valid and quarantined rows left out: they hold an erased key

    def __post_init__(self) -> None:
        if self.raw_rows != self.rows.num_rows + self.quarantine.num_rows + self.erased:
            raise AssertionError(
                f"batch {self.plan.seq}: {self.raw_rows} raw rows but {self.rows.num_rows} "
                f"valid + {self.quarantine.num_rows} quarantined + {self.erased} erased"
            )

    def without(self, erased: Erased, source: str) -> BuiltBatch:
        """The batch without the rows holding an erased key, its valid rows and its
        quarantine rows (of ``source``) alike, counted as ``erased``."""
        rows, removed = erased.without(self.rows)
        quarantine, held = quarantine_without_erased(
            self.quarantine, erased, {source: tuple(erased.values)}
        )
        if not removed and not held:
            return self
        return dataclasses.replace(
            self,
            rows=rows,
            quarantine=quarantine,
            fingerprint=fingerprint(rows) if removed else self.fingerprint,
            erased=self.erased + removed + held,
        )


def with_lineage(read: FileRead, seq: int) -> pa.Table:
    """A file's valid rows plus the batch number and the file they came from."""
    count = read.rows.num_rows
    rows = read.rows.append_column(STREAM_BATCH_COLUMN, pa.array([seq] * count, pa.int64()))
    return rows.append_column(
        SOURCE_FILE_COLUMN, pa.array([read.entry.relpath] * count, pa.string())
    )


def build_batch(source: StreamSource, plan: BatchPlan, reads: Sequence[FileRead]) -> BuiltBatch:
    """Concatenate the files' rows in plan order; the same files always give the same rows."""
    schema = source.schema
    parts = [conform(schema.empty_table(), schema)]
    parts += [conform(with_lineage(read, plan.seq), schema) for read in reads]
    rows = pa.concat_tables(parts).combine_chunks()
    quarantine = pa.concat_tables(
        [quarantine_schema().empty_table(), *(r.quarantine for r in reads)]
    ).combine_chunks()
    return BuiltBatch(plan, rows, quarantine, sum(r.raw_rows for r in reads), fingerprint(rows))


def batch_metadata(source: StreamSource, built: BuiltBatch) -> dict[str, Any]:
    """Commit metadata of a batch's table commit."""
    return {
        META_STREAM: source.name,
        META_BATCH: built.plan.seq,
        META_SIGNATURE: built.plan.signature,
        META_QUARANTINED: built.quarantine.num_rows,
        "idem.stream.files": len(built.plan.files),
        "idem.stream.raw_rows": built.raw_rows,
        "idem.stream.erased_rows": built.erased,
    }


def find_batch_commit(table: DeltaTable, source: StreamSource, seq: int) -> dict[str, Any] | None:
    """The recent history entry of batch ``seq``'s commit (its metadata), if within reach."""
    for _, info in commit_infos(table, HISTORY_LOOKBACK):
        if info.get(META_STREAM) == source.name and info.get(META_BATCH) == str(seq):
            return info
    return None
