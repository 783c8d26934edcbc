"""Per-strategy write, read and rerun-comparison code shared by the IO manager and checks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from idem_assets.io_manager.noop import same_content
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.tracking import SettledWrite
from idem_assets.io_manager.window import Window
from idem_assets.lake import (
    DedupeResult,
    Fingerprint,
    LakeTable,
    PendingFingerprint,
    Proof,
    WriteOptions,
    WriteResult,
    count_row_differences,
    date_range,
    dedupe_newest,
    fingerprint,
    merge_upsert,
    overwrite_slice,
    overwrite_stream,
    plan_merge,
    read_rows,
    replace_table,
)
from idem_assets.lake.fingerprint import resolve
from idem_assets.lake.frames import FrameLike, conform, to_arrow
from idem_assets.lake.merge import pruning_ranges
from idem_assets.lake.predicates import Condition


@dataclass(frozen=True)
class PreparedBatch:
    """An asset's output after deduplication, ready to be written or compared."""

    rows: pa.Table
    input_rows: int
    duplicates_dropped: int
    conflicting_keys: int
    # Started once here, on a background thread; every later step reuses it.
    fingerprint_job: Fingerprint | PendingFingerprint

    @property
    def fingerprint(self) -> Fingerprint:
        """The batch's fingerprint (waits if it is still being computed)."""
        return resolve(self.fingerprint_job)

    def dedupe_result(self) -> DedupeResult:
        """The deduplication outcome, for strategies that would otherwise redo it."""
        return DedupeResult(self.rows, self.duplicates_dropped, self.conflicting_keys)


@dataclass(frozen=True)
class RerunComparison:
    """Whether the table already equals what a clean rerun would produce."""

    passed: bool
    rows_differing: int
    expected: Fingerprint
    stored: Fingerprint
    detail: str


def prepare(spec: WriteSpec, data: FrameLike, schema: pa.Schema | None = None) -> PreparedBatch:
    """Conform to ``schema`` and keep one row per natural key when the spec asks for it."""
    rows = to_arrow(data)
    if schema is not None:
        rows = conform(rows, schema)
    if not spec.dedupe or not spec.natural_key:
        return PreparedBatch(rows, rows.num_rows, 0, 0, PendingFingerprint(rows))
    sort_by = [c for c in (spec.partition_column, *spec.prune_columns) if c]
    result = dedupe_newest(rows, spec.natural_key, spec.version_column, sort_by=sort_by)
    return PreparedBatch(
        result.rows,
        rows.num_rows,
        result.duplicates_dropped,
        result.conflicting_keys,
        PendingFingerprint(result.rows),
    )


def slice_conditions(
    spec: WriteSpec, window: Window, batch: PreparedBatch | None
) -> list[Condition]:
    """The part of the table a write of ``batch`` can touch (used to sign its files).

    ``batch`` is None for a streamed overwrite, whose slice is the window alone.
    """
    if spec.strategy == "overwrite":
        start, end = _require_window(spec, window)
        return [date_range(spec.partition_column or "", start, end)]
    if spec.strategy == "merge":
        assert batch is not None, "a merge is never streamed"
        return list(pruning_ranges(batch.rows, spec.prune_columns))
    return []


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
    """Write a prepared batch with the spec's strategy; no-op when nothing changed.

    An overwrite replaces exactly ``conditions`` (laid out by ``partition_by`` when it
    creates the table), or else the spec's days of ``window``. With ``settled`` (the
    slice's last settled write), a batch with the same fingerprint over a slice whose files
    have not changed since is a proven no-op, decided from table metadata without reading
    any data. ``options`` are ``WriteOptions`` fields.
    """
    write_options = WriteOptions(**dict(options or {}))
    if settled is not None:
        table = target.open()
        batch_fp = batch.fingerprint
        if table is not None and same_content(settled, table, batch_fp, conditions):
            return WriteResult.unchanged(
                spec.strategy,
                target.uri,
                table.version(),
                batch_fp,
                proof=Proof.CHECKPOINT,
                details={"record": settled.record_id},
            )
    if spec.strategy == "overwrite":
        if not conditions:
            start, end = _require_window(spec, window)
            conditions = [date_range(spec.partition_column or "", start, end)]
            partition_by = [spec.partition_column or ""]
        return overwrite_slice(
            target,
            batch.rows,
            conditions,
            partition_by=partition_by,
            commit_metadata=commit_metadata,
            known_fingerprint=batch.fingerprint_job,
            options=write_options,
        )
    if spec.strategy == "merge":
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
        )
    if spec.strategy == "replace":
        return replace_table(
            target,
            batch.rows,
            commit_metadata=commit_metadata,
            allow_empty=spec.allow_empty,
            known_fingerprint=batch.fingerprint,
            options=write_options,
        )
    raise ValueError(f"strategy {spec.strategy!r} is written by its own asset, not the IO manager")


def streamable(spec: WriteSpec, window: Window) -> bool:
    """Whether a record-batch stream can be written as it arrives, in flat memory.

    An overwrite of date partitions without deduplication can; anything else needs the
    whole batch (to deduplicate, merge, or compare) and reads the stream first.
    """
    return (
        spec.strategy == "overwrite"
        and window.partitioned
        and spec.partition_column is not None
        and not spec.partition_expr
        and not (spec.dedupe and spec.natural_key)
    )


def require_streamable(spec: WriteSpec) -> None:
    """Refuse a stream the spec's strategy cannot write as it arrives."""
    if spec.strategy != "overwrite":
        raise ValueError(
            "a record-batch stream can be written by the 'overwrite' strategy "
            f"only, not {spec.strategy!r}; return a table (pyarrow, polars or pandas) instead"
        )
    if spec.dedupe and spec.natural_key:
        raise ValueError(
            f"deduplication on {list(spec.natural_key)} needs the whole partition "
            "at once, so a record-batch stream cannot be deduplicated; return a table, or set "
            "dedupe to false when the stream already holds one row per key"
        )


def write_stream(
    spec: WriteSpec,
    target: LakeTable,
    batches: pa.RecordBatchReader,
    window: Window,
    schema: pa.Schema | None,
    commit_metadata: Mapping[str, Any] | None = None,
    *,
    settled: SettledWrite | None = None,
) -> WriteResult:
    """Overwrite the window with a stream of record batches, in flat memory (one commit).

    With ``settled``, a stream whose fingerprint equals the last settled write of the
    window, over files unchanged since, is a no-op proven without reading the table.
    """
    require_streamable(spec)
    start, end = _require_window(spec, window)
    column = spec.partition_column or ""
    conditions = [date_range(column, start, end)]

    def unchanged(table: DeltaTable, new: Fingerprint) -> bool:
        return same_content(settled, table, new, conditions)

    return overwrite_stream(
        target,
        batches,
        column,
        start,
        end,
        schema=schema,
        commit_metadata=commit_metadata,
        unchanged=unchanged,
    )


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


def compare(
    spec: WriteSpec, target: LakeTable, batch: PreparedBatch, window: Window
) -> RerunComparison:
    """Compare a recomputed batch with what the table holds, without writing."""
    expected = batch.fingerprint
    table = target.open()
    if spec.strategy == "merge":
        plan = plan_merge(
            table, batch.rows, spec.natural_key, spec.version_column, spec.prune_columns
        )
        stored = fingerprint(plan.current)
        return RerunComparison(
            passed=plan.changes == 0,
            rows_differing=plan.changes,
            expected=expected,
            stored=stored,
            detail=(
                f"a rerun would insert {plan.inserts} and update {plan.updates} row(s)"
                if plan.changes
                else "every batch row is stored or superseded by a newer version"
            ),
        )
    if spec.strategy == "overwrite":
        start, end = _require_window(spec, window)
        ranges = [date_range(spec.partition_column or "", start, end)]
    else:
        ranges = []
    stored_rows = read_rows(table, batch.rows.schema, ranges=ranges)
    stored = fingerprint(stored_rows)
    differing = 0 if stored == expected else count_row_differences(batch.rows, stored_rows)
    return RerunComparison(
        passed=stored == expected,
        rows_differing=differing,
        expected=expected,
        stored=stored,
        detail=f"{window.label()}: {differing} row(s) differ between the table and a clean rerun",
    )


def _require_window(spec: WriteSpec, window: Window) -> tuple[dt.date, dt.date]:
    if not window.partitioned:
        raise ValueError(f"strategy {spec.strategy!r} needs a partitioned asset")
    assert window.start is not None and window.end is not None
    return window.start, window.end
