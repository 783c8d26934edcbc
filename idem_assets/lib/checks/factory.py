"""The standard checks of a lake asset: rerun equality, unique natural key, landing checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import dagster as dg

from idem_assets.io_manager import (
    RerunComparison,
    Window,
    compare,
    compare_days,
    prepare,
    target_table,
)
from idem_assets.lake import read_rows
from idem_assets.lake.erasure import Erased
from idem_assets.lake.frames import to_arrow
from idem_assets.lake.history import PERIOD, PROBLEM, history_problems
from idem_assets.lake.history_deletes import history_deletes
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.checks.erasure import erased_keys_check
from idem_assets.lib.checks.landing import landing_checks
from idem_assets.lib.checks.per_partition import CheckName, LakeCheck, spans
from idem_assets.lib.checks.proofs import Reads
from idem_assets.lib.checks.samples import shown_rows
from idem_assets.resources import LakeResource

RERUN_EQUALITY = "rerun_equality"
UNIQUE_NATURAL_KEY = "unique_natural_key"
HISTORY_INTERVALS = "history_intervals"
_SAMPLE = 10


def _rerun_equality(
    definition: LakeAssetDef,
    lake: LakeResource,
    windows: Sequence[Window],
    _: frozenset[str],
    *,
    erased: Erased,
) -> Iterator[tuple[int, dg.AssetCheckResult]]:
    """Each span of adjacent days recomputed once and compared day by day (a table without
    a day column, or a window of more than a day, window by window)."""
    spec = definition.spec
    target = target_table(lake, spec, definition.key)
    daily = spec.partition_column is not None and all(_one_day(w) for w in windows)
    groups = spans(windows) if daily else [(w, [i]) for i, w in enumerate(windows)]
    for span, members in groups:
        rows, _ = erased.without(to_arrow(definition.compute(lake, span)))
        batch = prepare(spec, rows, definition.arrow_schema)
        compared = (
            compare_days(spec, target, batch, [windows[i].start for i in members])  # type: ignore[misc]
            if daily
            else [compare(spec, target, batch, span)]
        )
        for index, result in zip(members, compared, strict=True):
            yield index, _rerun_result(windows[index], result)


def _one_day(window: Window) -> bool:
    return window.start is not None and window == Window.day(window.start)


def _rerun_result(window: Window, result: RerunComparison) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=RERUN_EQUALITY,
        passed=result.passed,
        description=result.detail,
        metadata={
            "partition_range": window.label(),
            "rows_differing": result.rows_differing,
            "expected_fingerprint": str(result.expected),
            "stored_fingerprint": str(result.stored),
            "expected_rows": result.expected.rows,
            "stored_rows": result.stored.rows,
        },
    )


RERUN_EQUALITY_CHECK = LakeCheck(
    names=(
        CheckName(
            RERUN_EQUALITY,
            "Recomputes the output from the same inputs without "
            "writing and compares its fingerprint with the table: passes when a clean "
            "rerun would change nothing.",
        ),
    ),
    evaluate_windows=_rerun_equality,
    reads=frozenset({Reads.INPUTS, Reads.SLICE, Reads.ERASURES}),
)


def _unique_key(
    definition: LakeAssetDef, lake: LakeResource, windows: Sequence[Window], _: frozenset[str]
) -> Iterator[tuple[int, dg.AssetCheckResult]]:
    """Keys of each partition's rows that appear more than once anywhere in the table.

    The days of a run ask about the same table version, so its keys are read and counted
    once per step (a 30-day backfill of a merge table read every key 30 times before).
    """
    import polars as pl  # here, not at import: see idem_assets._lazy

    key = tuple(definition.spec.natural_key)
    column = definition.spec.partition_column
    table = target_table(lake, definition.spec, definition.key).open()
    by_day = column is not None and any(window.partitioned for window in windows)
    columns = list(dict.fromkeys([*key, column])) if by_day else list(key)
    frame = pl.from_arrow(read_rows(table, definition.arrow_schema, columns=columns))
    assert isinstance(frame, pl.DataFrame)
    repeated = frame.group_by(list(key)).len().filter(pl.col("len") > 1)
    # Per day in one pass: rows per day, and each day's keys that repeat anywhere.
    daily = by_day and all(_one_day(window) for window in windows)
    rows_by_day = dict(frame.group_by(column).len().iter_rows()) if daily else {}
    hits_by_day = (
        frame.join(repeated, on=list(key), how="inner")
        .unique([*key, column])
        .partition_by(column, as_dict=True)
        if daily
        else {}
    )
    for index, window in enumerate(windows):
        counts, checked = repeated, frame.height
        if daily:
            checked = rows_by_day.get(window.start, 0)
            counts = hits_by_day.get((window.start,), repeated.clear()).select([*key, "len"])
        elif column is not None and window.partitioned:
            assert window.start is not None and window.end is not None
            inside = frame.filter(
                pl.col(column).is_between(window.start, window.end, closed="left")
            )
            checked = inside.height
            counts = counts.join(inside.select(key).unique(), on=key, how="semi")
        counts = counts.sort(key)
        surplus = int(counts["len"].sum() - counts.height) if counts.height else 0
        yield (
            index,
            dg.AssetCheckResult(
                check_name=UNIQUE_NATURAL_KEY,
                passed=counts.height == 0,
                metadata={
                    "partition_range": window.label(),
                    "rows_checked": checked,
                    "duplicated_keys": counts.height,
                    "surplus_rows": surplus,
                    "sample": dg.MetadataValue.json(
                        shown_rows(counts.head(_SAMPLE).to_dicts(), definition.spec.erasable_keys)
                    ),
                },
            ),
        )


def unique_key_check(definition: LakeAssetDef) -> LakeCheck:
    """No natural key of a partition's rows appears twice anywhere in the table."""
    key = ", ".join(definition.spec.natural_key)
    return LakeCheck(
        names=(
            CheckName(
                UNIQUE_NATURAL_KEY,
                f"Every ({key}) appears at most once in the whole table; each partition "
                "reports the keys of its own rows (a table without a day column: the whole table).",
            ),
        ),
        evaluate_windows=_unique_key,
        reads=frozenset({Reads.TABLE}),
    )


def _history_intervals(
    definition: LakeAssetDef, lake: LakeResource, windows: Sequence[Window], _: frozenset[str]
) -> Iterator[tuple[int, dg.AssetCheckResult]]:
    """The history's invariants, judged over the whole table once (a key's versions may be
    in any partition); each partition reports the keys holding a row of its days (a table
    without a day column: every key)."""
    import polars as pl  # here, not at import: see idem_assets._lazy

    spec = definition.spec
    assert spec.version_column is not None
    key = list(spec.natural_key)
    target = target_table(lake, spec, definition.key)
    table = target.open()
    column = spec.partition_column
    columns = list(dict.fromkeys([*key, *PERIOD, *([column] if column else [])]))
    rows = read_rows(table, columns=columns) if table is not None else None
    deletes = history_deletes(target, key, spec.version_column)
    problems = (
        pl.from_arrow(history_problems(rows, key, deletes=deletes))
        if rows is not None
        else pl.DataFrame(schema={**{k: pl.Int64 for k in key}, PROBLEM: pl.String})
    )
    frame = pl.from_arrow(rows) if rows is not None else None
    assert isinstance(problems, pl.DataFrame)
    for index, window in enumerate(windows):
        found, checked = problems, frame.height if frame is not None else 0
        if frame is not None and column is not None and window.partitioned:
            assert window.start is not None and window.end is not None
            inside = frame.filter(
                pl.col(column).is_between(window.start, window.end, closed="left")
            )
            checked = inside.height
            found = problems.join(inside.select(key).unique(), on=key, how="semi")
        yield (
            index,
            dg.AssetCheckResult(
                check_name=HISTORY_INTERVALS,
                passed=found.height == 0,
                metadata={
                    "partition_range": window.label(),
                    "rows_checked": checked,
                    "keys_with_problems": found.select(key).unique().height,
                    "sample": dg.MetadataValue.json(
                        shown_rows(found.head(_SAMPLE).to_dicts(), spec.erasable_keys)
                    ),
                },
            ),
        )


def history_check(definition: LakeAssetDef) -> LakeCheck:
    """A history table's periods: one current row per key, no overlap, no gap but a delete."""
    return LakeCheck(
        names=(
            CheckName(
                HISTORY_INTERVALS,
                "Each key has at most one current row, and its versions' periods neither "
                "overlap nor leave a gap that no delete explains.",
            ),
        ),
        evaluate_windows=_history_intervals,
        reads=frozenset({Reads.TABLE}),
    )


def standard_checks(definition: LakeAssetDef) -> list[LakeCheck]:
    """The checks every lake asset gets from its definition."""
    checks = [RERUN_EQUALITY_CHECK]
    if definition.spec.strategy == "history":
        checks.append(history_check(definition))
    elif definition.spec.natural_key:
        checks.append(unique_key_check(definition))
    if definition.landing_source is not None:
        checks.append(landing_checks(definition))
    if definition.spec.erasable_keys:
        checks.append(erased_keys_check(definition))
    return checks
