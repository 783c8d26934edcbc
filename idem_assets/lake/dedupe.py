"""Keep the newest row per natural key, with a deterministic tie-break."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.lake.fingerprint import row_hashes
from idem_assets.lake.frames import FrameLike, to_arrow, to_polars

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pl = lazy_module("polars")


@dataclass(frozen=True)
class DedupeResult:
    """The surviving rows and what was dropped on the way."""

    rows: pa.Table
    duplicates_dropped: int
    # Keys whose newest versions tie on the version column but differ in content.
    conflicting_keys: int


# The boolean column that marks an event as a delete of its key, while events are ordered.
DELETE_FLAG = "__idem_delete"


def survivor_order(
    columns: Sequence[str], key: Sequence[str], version_column: str | None
) -> tuple[list[str], list[bool]]:
    """Sort columns and directions that put each key's surviving row first.

    Within a key: highest version first, then a delete before an upsert (when the
    ``DELETE_FLAG`` column is among ``columns``: a source that deletes and writes a key
    at one version must say which came last), then the lexicographically greatest row
    over the remaining columns in name order (nulls last). It depends on content
    only, never on input position, and any engine that sorts (Polars, Spark,
    SQL) reproduces it exactly.
    """
    key = list(key)
    flag = [DELETE_FLAG] if DELETE_FLAG in columns else []
    rest = sorted(c for c in columns if c not in key and c != version_column and c not in flag)
    order = [*key, *([version_column] if version_column else []), *flag, *rest]
    descending = [False] * len(key) + [True] * (len(order) - len(key))
    return order, descending


def survivor_sort(
    frame: pl.DataFrame, key: Sequence[str], version_column: str | None, then_by: Sequence[str] = ()
) -> pl.DataFrame:
    """``frame`` sorted by ``survivor_order``: by key, each key's survivor first, then the
    rest in the same order (``then_by`` breaks exact ties)."""
    order, descending = survivor_order(
        [c for c in frame.columns if c not in then_by], key, version_column
    )
    return frame.sort(
        [*order, *then_by], descending=[*descending, *([False] * len(then_by))], nulls_last=True
    )


def survivors(
    frame: pl.DataFrame, key: Sequence[str], version_column: str | None, then_by: Sequence[str] = ()
) -> pl.DataFrame:
    """The first row per key under ``survivor_order`` (``then_by`` breaks exact ties)."""
    ordered = survivor_sort(frame, key, version_column, then_by)
    return ordered.unique(subset=list(key), keep="first", maintain_order=True)


def _column(table: pa.Table, name: str) -> pl.Series:
    # Only the key/sort columns are converted; Polars' hash-based n_unique is far
    # faster than Arrow's count_distinct on integer keys.
    series = pl.from_arrow(table.column(name), rechunk=False)
    assert isinstance(series, pl.Series)
    return series


def _unique_in_arrow(table: pa.Table, key: list[str]) -> bool:
    """Single non-null key column with all values distinct (else: take the slow path)."""
    if len(key) != 1:
        return False
    column = _column(table, key[0])
    return column.null_count() == 0 and column.n_unique() == table.num_rows


def _sorted_in_arrow(table: pa.Table, columns: list[str]) -> bool:
    """Cheap sufficient test: leading columns constant, then the last one ascending."""
    *leading, last = columns
    for name in leading:
        column = _column(table, name)
        if column.null_count() or column.n_unique() > 1:
            return False
    column = _column(table, last)
    return column.null_count() == 0 and column.is_sorted()


def _conflicts(frame: pl.DataFrame, key: list[str], version_column: str) -> int:
    first, _ = row_hashes(frame)
    hashed = frame.select([*key, version_column]).with_columns(
        pl.Series("__content", first, dtype=pl.UInt64)
    )
    newest = hashed.filter(pl.col(version_column) == pl.col(version_column).max().over(key))
    return (
        newest.group_by(key)
        .agg(pl.col("__content").n_unique().alias("contents"))
        .filter(pl.col("contents") > 1)
        .height
    )


def dedupe_newest(
    data: FrameLike,
    key: Sequence[str],
    version_column: str | None,
    sort_by: Sequence[str] = (),
) -> DedupeResult:
    """One row per ``key``: highest ``version_column``, ties broken by content.

    Any permutation of the input (files read in another order, a backfill run in
    reverse) keeps the same row. Output is sorted by ``sort_by`` then ``key`` so
    Delta file statistics stay tight for pruning.
    """
    key = list(key)
    table = to_arrow(data)
    missing = [
        c
        for c in [*key, *([version_column] if version_column else [])]
        if c not in table.column_names
    ]
    if missing:
        raise ValueError(f"cannot dedupe: column(s) {missing} not in {table.column_names}")
    order = [*sort_by, *key]
    if table.num_rows == 0 or _unique_in_arrow(table, key):
        # The common case, decided in Arrow without converting the frame: nothing to
        # drop, and often nothing to sort either.
        if not _sorted_in_arrow(table, order):
            table = table.sort_by([(c, "ascending") for c in order])
        return DedupeResult(rows=table, duplicates_dropped=0, conflicting_keys=0)
    frame = to_polars(table)
    kept = survivors(frame, key, version_column)
    dropped = frame.height - kept.height
    conflicts = _conflicts(frame, key, version_column) if version_column else 0
    kept = kept.sort(order)
    return DedupeResult(
        rows=kept.to_arrow(), duplicates_dropped=dropped, conflicting_keys=conflicts
    )
