"""Conservation: every raw landing row is loaded, dropped as a duplicate, or quarantined."""

import dagster as dg

from idem_assets.io_manager import PreparedBatch, Window, target_table
from idem_assets.io_manager.strategies import strategy_for, window_slice
from idem_assets.lake import read_rows
from idem_assets.landing.quarantine import QUARANTINE_TABLE, quarantine_conditions
from idem_assets.landing.reader import LandingBatch
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.resources import LakeResource

CONSERVATION = "conservation"


def loaded_rows(
    definition: LakeAssetDef, lake: LakeResource, window: Window, deduplicated: PreparedBatch
) -> int:
    """Rows of the deduplicated batch that the table holds (or holds a newer version of)."""
    spec = definition.spec
    table = target_table(lake, spec, definition.key).open()
    if table is None:
        return 0
    if spec.strategy == "merge":
        import polars as pl  # here, not at import: see idem_assets._lazy

        # The whole key identifies a row: the first column only prunes what is read.
        key = list(spec.natural_key)
        found = read_rows(
            table,
            ranges=strategy_for(spec).touched(spec, window_slice(spec, window), deduplicated),
            keys=(key[0], deduplicated.rows.column(key[0]).combine_chunks()),
            columns=key,
        )
        batch = pl.from_arrow(deduplicated.rows.select(key))
        stored = pl.from_arrow(found)
        assert isinstance(batch, pl.DataFrame) and isinstance(stored, pl.DataFrame)
        return batch.join(stored.unique(), on=key, how="semi", nulls_equal=True).height
    ranges = strategy_for(spec).touched(spec, window_slice(spec, window), deduplicated)
    return read_rows(table, ranges=ranges, columns=list(spec.natural_key) or None).num_rows


def conservation_result(
    definition: LakeAssetDef,
    lake: LakeResource,
    window: Window,
    batch: LandingBatch,
    deduplicated: PreparedBatch,
) -> dg.AssetCheckResult:
    """raw rows == loaded + duplicates dropped + quarantined, from the stored tables."""
    contract = definition.landing_source
    assert contract is not None
    loaded = loaded_rows(definition, lake, window, deduplicated)
    quarantine = lake.table(QUARANTINE_TABLE).open()
    filters = quarantine_conditions(contract, window)
    quarantined = (
        0
        if quarantine is None
        else read_rows(quarantine, ranges=filters, columns=["row_number"]).num_rows
    )
    duplicates = deduplicated.duplicates_dropped
    unaccounted = batch.raw_rows - (loaded + duplicates + quarantined)
    passed = unaccounted == 0 and loaded == deduplicated.rows.num_rows
    return dg.AssetCheckResult(
        check_name=CONSERVATION,
        passed=passed,
        metadata={
            "partition_range": window.label(),
            "raw_rows": batch.raw_rows,
            "loaded": loaded,
            "duplicates_dropped": duplicates,
            "quarantined": quarantined,
            "unaccounted": unaccounted,
            "expected_loaded": deduplicated.rows.num_rows,
        },
    )
