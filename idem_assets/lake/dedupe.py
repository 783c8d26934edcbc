"""Keep the newest row per natural key, with a deterministic tie-break."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from idem_assets.lake.fingerprint import row_hashes
from idem_assets.lake.frames import FrameLike, to_polars

_HASH = "__idem_row_hash"


@dataclass(frozen=True)
class DedupeResult:
    """The surviving rows and what was dropped on the way."""

    rows: pa.Table
    duplicates_dropped: int
    # Keys whose newest versions tie on the version column but differ in content.
    conflicting_keys: int


def with_content_rank(frame: pl.DataFrame) -> pl.DataFrame:
    """Add a content hash column used to break ties independently of input order."""
    first, _ = row_hashes(frame)
    return frame.with_columns(pl.Series(_HASH, first, dtype=pl.UInt64))


def dedupe_newest(
    data: FrameLike,
    key: Sequence[str],
    version_column: str | None,
    sort_by: Sequence[str] = (),
) -> DedupeResult:
    """One row per ``key``: highest ``version_column``, then highest content hash.

    The tie-break uses the row's content, not its position, so any permutation
    of the input (files read in another order, a backfill run in reverse) keeps
    the same row. Output is sorted by ``sort_by`` then ``key`` for tight file stats.
    """
    frame = to_polars(data)
    key = list(key)
    missing = [c for c in [*key, *([version_column] if version_column else [])] if c not in frame]
    if missing:
        raise ValueError(f"cannot dedupe: column(s) {missing} not in {frame.columns}")
    if frame.height == 0:
        return DedupeResult(rows=frame.to_arrow(), duplicates_dropped=0, conflicting_keys=0)
    ranked = with_content_rank(frame)
    order = [*key, *([version_column] if version_column else []), _HASH]
    descending = [False] * len(key) + [True] * (len(order) - len(key))
    ranked = ranked.sort(order, descending=descending, nulls_last=True)
    conflicts = 0
    if version_column:
        top = ranked.group_by(key, maintain_order=True).head(2)
        conflicts = (
            top.group_by(key)
            .agg(
                pl.col(version_column).n_unique().alias("versions"),
                pl.col(_HASH).n_unique().alias("contents"),
                pl.len().alias("n"),
            )
            .filter((pl.col("n") == 2) & (pl.col("versions") == 1) & (pl.col("contents") == 2))
            .height
        )
    kept = ranked.unique(subset=key, keep="first", maintain_order=True)
    out_order = [*sort_by, *key]
    kept = kept.drop(_HASH).sort(out_order)
    return DedupeResult(
        rows=kept.to_arrow(),
        duplicates_dropped=frame.height - kept.height,
        conflicting_keys=conflicts,
    )
