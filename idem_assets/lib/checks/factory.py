"""Check factory: rerun equality and unique natural key, plus the landing checks."""


from collections.abc import Sequence

import dagster as dg
import polars as pl

from idem_assets.io_manager import compare, prepare, target_table
from idem_assets.lake import read_rows
from idem_assets.lib.checks.landing import landing_checks
from idem_assets.lib.checks.window import check_window
from idem_assets.lib.lake_asset import LakeAssetDef
from idem_assets.resources import LakeResource

RERUN_EQUALITY = "rerun_equality"
UNIQUE_NATURAL_KEY = "unique_natural_key"
_SAMPLE = 10


def rerun_equality_check(
    definition: LakeAssetDef,
    partitions_def: dg.PartitionsDefinition | None,
    blocking: bool,
) -> dg.AssetChecksDefinition:
    """Recompute the asset for the same partitions without writing; compare fingerprints."""

    @dg.asset_check(
        asset=definition.key,
        name=RERUN_EQUALITY,
        blocking=blocking,
        description=(
            "Recomputes the output from the same inputs without writing and compares its "
            "fingerprint with the table: passes when a clean rerun would change nothing."
        ),
    )
    def _rerun_equality(
        context: dg.AssetCheckExecutionContext, lake: LakeResource
    ) -> dg.AssetCheckResult:
        window = check_window(context, partitions_def, definition.key)
        spec = definition.spec
        batch = prepare(spec, definition.compute(lake, window), definition.schema)
        result = compare(spec, target_table(lake, spec, definition.key), batch, window)
        return dg.AssetCheckResult(
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

    return _rerun_equality


def unique_key_check(
    definition: LakeAssetDef,
    partitions_def: dg.PartitionsDefinition | None,
    blocking: bool,
) -> dg.AssetChecksDefinition:
    """No natural key appears twice anywhere in the table."""
    key = list(definition.spec.natural_key)

    @dg.asset_check(
        asset=definition.key,
        name=UNIQUE_NATURAL_KEY,
        blocking=blocking,
        description=f"Every ({', '.join(key)}) appears at most once in the whole table.",
    )
    def _unique_key(
        context: dg.AssetCheckExecutionContext, lake: LakeResource
    ) -> dg.AssetCheckResult:
        table = target_table(lake, definition.spec, definition.key).open()
        keys = pl.from_arrow(read_rows(table, definition.schema, columns=key))
        assert isinstance(keys, pl.DataFrame)
        counts = keys.group_by(key).len().filter(pl.col("len") > 1).sort(key)
        duplicates = int(counts["len"].sum() - counts.height) if counts.height else 0
        return dg.AssetCheckResult(
            passed=counts.height == 0,
            metadata={
                "rows_checked": keys.height,
                "duplicated_keys": counts.height,
                "surplus_rows": duplicates,
                "sample": dg.MetadataValue.json(counts.head(_SAMPLE).to_dicts()),
            },
        )

    return _unique_key


def lake_asset_checks(
    definition: LakeAssetDef,
    partitions_def: dg.PartitionsDefinition | None,
    *,
    blocking: bool = False,
) -> Sequence[dg.AssetChecksDefinition]:
    """The standard checks of a lake asset."""
    checks = [rerun_equality_check(definition, partitions_def, blocking)]
    if definition.spec.natural_key:
        checks.append(unique_key_check(definition, partitions_def, blocking))
    if definition.landing_source is not None:
        checks.append(landing_checks(
            definition, partitions_def, rules=definition.value_rules,
            quarantine_share=definition.quarantine_share, blocking=blocking))
    return checks
