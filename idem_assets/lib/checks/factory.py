"""The standard checks of a lake asset: rerun equality, unique natural key, landing checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import dagster as dg

from idem_assets.io_manager import Window, compare, prepare, target_table
from idem_assets.lake import read_rows
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.checks.landing import landing_checks
from idem_assets.lib.checks.per_partition import CheckName, LakeCheck
from idem_assets.resources import LakeResource

RERUN_EQUALITY = "rerun_equality"
UNIQUE_NATURAL_KEY = "unique_natural_key"
_SAMPLE = 10


def _rerun_equality(
    definition: LakeAssetDef, lake: LakeResource, window: Window, _: frozenset[str]
) -> Iterator[dg.AssetCheckResult]:
    spec = definition.spec
    batch = prepare(spec, definition.compute(lake, window), definition.arrow_schema)
    result = compare(spec, target_table(lake, spec, definition.key), batch, window)
    yield dg.AssetCheckResult(
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
    evaluate=_rerun_equality,
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
    for index, window in enumerate(windows):
        counts, checked = repeated, frame.height
        if column is not None and window.partitioned:
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
                    "sample": dg.MetadataValue.json(counts.head(_SAMPLE).to_dicts()),
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
    )


def standard_checks(definition: LakeAssetDef) -> list[LakeCheck]:
    """The checks every lake asset gets, then the ones its definition adds."""
    checks = [RERUN_EQUALITY_CHECK]
    if definition.spec.natural_key:
        checks.append(unique_key_check(definition))
    if definition.landing_source is not None:
        checks.append(landing_checks(definition))
    return [*checks, *definition.checks]
