"""Overwrite a slice of a table (a range of date partitions) in one Delta commit."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from deltalake import CommitProperties, DeltaTable, Schema, write_deltalake

from idem_assets._lazy import lazy_module
from idem_assets.lake.change_data import feeds_changes, merge_changed_rows
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.delta_log import require_plain_table
from idem_assets.lake.fingerprint import (
    Fingerprint,
    FingerprintAccumulator,
    fingerprint,
    fingerprints_by,
    resolve,
)
from idem_assets.lake.frames import FrameLike, conform, nullable, to_arrow
from idem_assets.lake.predicates import Condition, In, OneOf, Range, conjunction, date_range
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.staging import commit_overwrite, discarded_on_failure, stage_batches
from idem_assets.lake.stored import slice_fingerprint
from idem_assets.lake.tables import (
    LakeTable,
    WriteOptions,
    check_columns,
    create_table,
    read_rows,
    slice_signature,
    table_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


STRATEGY = "overwrite"


class PartitionMismatchError(ValueError):
    """Rows that lie outside the slice being overwritten."""


def check_within(table: pa.Table, conditions: Sequence[Condition]) -> None:
    """Refuse rows outside the slice (including nulls in its columns)."""
    for condition in conditions:
        values = table.column(condition.column)
        if isinstance(condition, OneOf):
            inside = pc.equal(values, pa.scalar(condition.value))
            expected = f"= {condition.value!r}"
        elif isinstance(condition, In):
            inside = pc.is_in(values, value_set=pa.array(list(condition.values), values.type))
            expected = (
                f"one of {condition.described}"
                if condition.described
                else f"in {list(condition.values)[:20]!r}"
                + (
                    f" (and {len(condition.values) - 20} more)"
                    if len(condition.values) > 20
                    else ""
                )
            )
        else:
            upper = pc.less_equal if condition.inclusive else pc.less
            start, end = condition.bounds(values.type)
            inside = pc.and_(pc.greater_equal(values, start), upper(values, end))
            bracket = "]" if condition.inclusive else ")"
            expected = f"in [{condition.start}, {condition.end}{bracket}"
        outside = pc.invert(pc.fill_null(inside, False))
        bad = pc.sum(pc.cast(outside, pa.int64())).as_py() or 0
        if bad:
            sample = pc.filter(values, outside).slice(0, 5).to_pylist()
            raise PartitionMismatchError(
                f"{bad} row(s) have {condition.column} not {expected}, e.g. {sample}; "
                "nothing was written"
            )


def overwrite_slice(
    target: LakeTable,
    data: FrameLike,
    conditions: Sequence[Condition],
    *,
    partition_by: Sequence[str] = (),
    schema: pa.Schema | None = None,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Make the rows matching ``conditions`` be exactly ``data``, in one commit.

    Rows outside the slice are refused before anything is written. If the slice
    already holds the same content nothing is committed. A concurrent writer that
    commits first makes this call re-read and re-decide. When the slice is empty there
    is nothing to compare with, so the fingerprint is only awaited after the commit.
    ``commit.options``: the table configuration and writer properties, ``evolve_schema``
    (new columns are added to the table) and a change feed's ``change_key``.
    """
    conditions = tuple(conditions)
    if not conditions:
        raise ValueError("an overwrite needs at least one condition; use replace_table instead")
    rows = to_arrow(data)
    if schema is not None:
        rows = conform(rows, schema)
    check_within(rows, conditions)
    pending = commit.pending_fingerprint(rows)
    properties = commit.properties()
    options = commit.options

    def once(attempt: Attempt) -> WriteResult:
        count, details = rows.num_rows, None
        table = attempt.table
        if table is None:
            # A racer that created the table first: the retry takes the predicate path.
            version = create_table(target, rows, properties, options, partition_by)
        else:
            check_columns(rows, table, options)
            empty = slice_signature(table, conditions).startswith("0:")
            if empty and rows.num_rows == 0:
                # Nothing stored there and nothing to store: already the wanted state.
                return attempt.unchanged(resolve(pending), proof=Proof.CONTENT)
            changed = None if empty else changed_days(table, rows, conditions)
            if not empty and (
                not changed.days
                if changed is not None
                else fingerprint(read_rows(table, ranges=conditions)) == resolve(pending)
            ):
                return attempt.unchanged(resolve(pending), proof=Proof.CONTENT)
            written, replaced = rows, conditions
            if changed is not None and changed.kept:
                written, replaced = changed.rows_of(rows), (changed.condition(),)
            evolve = options.evolve_schema and set(rows.column_names) - set(
                table_schema(table).names
            )
            made = replace_rows(
                table,
                written if evolve else conform(written, table_schema(table)),
                replaced,
                properties,
                options,
                schema_mode="merge" if evolve else None,
            )
            if made is None:  # a change feed's write found no row differing
                return attempt.unchanged(resolve(pending), proof=Proof.CONTENT)
            version = made
            if changed is not None and changed.kept:
                details = {"days_rewritten": len(changed.days), "days_kept": changed.kept}
                count = written.num_rows
        return attempt.inserted(version, count, resolve(pending), details=details)

    return commit_retried(target, STRATEGY, once)


@dataclass(frozen=True)
class ChangedDays:
    """The date partitions of a slice whose stored rows differ from the new rows'."""

    column: str
    days: tuple[dt.date, ...]
    # Partitions of the slice whose stored rows already equal the new ones.
    kept: int

    def rows_of(self, rows: pa.Table) -> pa.Table:
        """The new rows of the changed partitions."""
        values = pa.array(list(self.days), rows.schema.field(self.column).type)
        return rows.filter(pc.is_in(rows.column(self.column), value_set=values))

    def condition(self) -> In:
        """The changed partitions, as the condition their rows replace."""
        return In(self.column, self.days)


def changed_days(
    table: DeltaTable, rows: pa.Table, conditions: Sequence[Condition]
) -> ChangedDays | None:
    """Which date partitions of the slice the new rows change, compared day by day.

    A range rerun whose landing changed on one day then rewrites that day's files alone,
    leaving every other day's files (and what was proven about them) in place. None when
    the slice is not one date range over a partition column of the table: then it is
    compared and replaced whole.
    """
    condition = conditions[0]
    column = condition.column
    if (
        len(conditions) != 1
        or not isinstance(condition, Range)
        or not isinstance(condition.start, dt.date)
        or column not in table.metadata().partition_columns
    ):
        return None
    stored = fingerprints_by(read_rows(table, ranges=conditions), column)
    new = fingerprints_by(rows, column)
    both = stored.keys() | new.keys()
    days = tuple(sorted(d for d in both if stored.get(d) != new.get(d)))  # type: ignore[type-var]
    return ChangedDays(column, days, len(both) - len(days))  # type: ignore[arg-type]


def overwrite_partitions(
    target: LakeTable,
    data: FrameLike,
    partition_column: str,
    start: dt.date,
    end: dt.date,
    *,
    schema: pa.Schema | None = None,
    partitioned: bool = True,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Make date partitions ``[start, end)`` hold exactly ``data``, in one commit.

    The predicate covers the whole range, so a single-run backfill of many days
    replaces every day in it (days with no rows become empty), not just the first.
    """
    return overwrite_slice(
        target,
        data,
        [date_range(partition_column, start, end)],
        partition_by=[partition_column] if partitioned else (),
        schema=schema,
        commit=commit,
    )


def overwrite_stream(
    target: LakeTable,
    batches: pa.RecordBatchReader,
    partition_column: str,
    start: dt.date,
    end: dt.date,
    *,
    schema: pa.Schema | None = None,
    commit: Commit = DEFAULT_COMMIT,
    unchanged: Callable[[DeltaTable, Fingerprint], bool] | None = None,
) -> WriteResult:
    """Make date partitions ``[start, end)`` hold exactly the stream's rows, in one commit.

    For days larger than memory. Each record batch is checked against the range, folded
    into the fingerprint and written to a staged Parquet file as it arrives, so memory
    holds a batch, not the day (delta-rs's own writer buffers a partitioned stream). The
    staged files are then committed in one Delta transaction that removes the range's old
    files, or deleted when the range already holds the same content (``unchanged`` may
    prove that cheaply, e.g. from a checkpoint; else the stored slice is fingerprinted
    file by file). A row outside the range or a failing source leaves nothing behind; a
    lost commit race re-decides on the new snapshot with the same staged files. Of
    ``commit`` it takes the metadata and txn: the stream is fingerprinted as it arrives.
    """
    rng = date_range(partition_column, start, end)
    table = target.open()
    if table is not None:
        require_plain_table(table, partition_column)
        schema = table_schema(table)
    schema = nullable(schema if schema is not None else batches.schema)
    if partition_column not in schema.names:
        raise ValueError(f"the stream has no {partition_column!r} column to lay out by")
    accumulator = FingerprintAccumulator()

    def checked() -> Iterator[pa.Table]:
        for batch in batches:
            rows = conform(pa.Table.from_batches([batch]), schema)
            check_within(rows, [rng])
            accumulator.add(rows)
            yield rows

    staged = stage_batches(target, checked(), schema, partition_column)
    new_fp = accumulator.result()
    properties = commit.properties()

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if table is not None:
            proven = (
                Proof.CHECKPOINT
                if unchanged is not None and unchanged(table, new_fp)
                else (Proof.CONTENT if slice_fingerprint(table, rng) == new_fp else Proof.NONE)
            )
            if proven:
                staged.discard()
                return attempt.unchanged(new_fp, proof=proven, details={"streamed": True})
        version = commit_overwrite(target, table, staged, schema, start, end, properties)
        return attempt.inserted(
            version,
            staged.rows,
            new_fp,
            details={"files_added": len(staged.files), "streamed": True},
        )

    with discarded_on_failure(target, staged):
        return commit_retried(target, STRATEGY, once)


def replace_rows(
    table: DeltaTable,
    rows: pa.Table,
    conditions: Sequence[Condition],
    properties: CommitProperties,
    options: WriteOptions,
    *,
    schema_mode: Literal["merge", "overwrite"] | None = None,
) -> int | None:
    """Make the rows matching ``conditions`` (all rows without) be ``rows``, in one commit;
    the version made, or None when no row differs (then nothing is committed).

    A table keeping a change feed gets a MERGE of the rows that differ, so its feed names
    them alone; any other table, or rows whose columns are not the table's, gets delta-rs's
    overwrite (replaceWhere). ``rows`` of the table's columns are typed to its schema.
    """
    if feeds_changes(table) and _same_columns(rows, table):
        new = conform(rows, table_schema(table))
        return merge_changed_rows(
            table,
            lambda: [(read_rows(table, ranges=conditions), new)],
            key=options.change_key,
            prune=conditions,
            properties=properties,
            writer_properties=options.writer(),
        )
    write_deltalake(
        table,
        rows,
        mode="overwrite",
        predicate=conjunction(tuple(conditions)) or None,
        schema_mode=schema_mode,
        commit_properties=properties,
        writer_properties=options.writer(),
    )
    return table.version()


def _same_columns(rows: pa.Table, table: DeltaTable) -> bool:
    # Compared as Delta types, so Arrow spellings (string / large_string) do not matter.
    given = [(f.name, f.type) for f in Schema.from_arrow(nullable(rows.schema)).fields]
    return sorted(given) == sorted((f.name, f.type) for f in table.schema().fields)
