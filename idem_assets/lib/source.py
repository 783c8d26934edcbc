"""A declared landing source's Dagster definitions: its asset, checks and landing sensor.

The YAML component (``LandingSourceComponent``) and the Python form
(``source_definitions(DailySource(...))``) both end here, so a source declared either
way gets exactly the same asset, IO manager settings, checks and sensor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dagster as dg

from idem_assets._lazy import lazy_module
from idem_assets.io_manager import TableOutput, Window, WriteSpec
from idem_assets.lib.asset_def import EngineConfig, LakeAssetDef
from idem_assets.lib.lake_asset import lake_asset
from idem_assets.lib.landing_io import landing_output, read_landing
from idem_assets.lib.sensors import daily_landing_sensor, snapshot_landing_sensor
from idem_assets.partitions import daily_partitions, partition_dates
from idem_assets.resources import CheckpointResource, LakeResource, SparkResource
from idem_assets.sources import DailySource, LandingSource, SnapshotSource

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


def _date_of(pairs: tuple[tuple[str, str], ...]) -> Callable[[pa.Table], pa.Table]:
    def derive(rows: pa.Table) -> pa.Table:
        for name, source in pairs:
            # Timestamps are UTC instants, so their date is the UTC calendar day.
            rows = rows.append_column(name, pc.cast(rows.column(source), pa.date32()))
        return rows

    return derive


def _date_of_spark(pairs: tuple[tuple[str, str], ...]) -> Callable[[Any], Any]:
    def derive(frame: Any) -> Any:
        from idem_assets.spark import with_dates_of_spark  # pyspark only when Spark runs

        return with_dates_of_spark(frame, pairs)

    return derive


@functools.cache
def lake_asset_def(source: LandingSource) -> LakeAssetDef:
    """The table contract of a declared source: write spec, schema, recompute, checks."""
    contract = source.contract()
    pairs = tuple((c.name, c.date_of) for c in source.columns if c.date_of)
    derive = _date_of(pairs) if pairs else None

    def compute(lake: LakeResource, window: Window) -> pa.Table:
        rows = read_landing(lake, contract, window).rows
        return derive(rows) if derive else rows

    return LakeAssetDef(
        name=source.table,
        spec=WriteSpec(
            strategy=source.resolved_strategy,
            natural_key=tuple(source.natural_key),
            version_column=source.version,
            partition_column=source.resolved_partition_column,
            prune_columns=tuple(source.prune_columns),
            delete_column=source.delete_marker.column if source.delete_marker else None,
            delete_value=source.delete_marker.value if source.delete_marker else True,
            erasable_keys=tuple(source.erasable_keys),
        ),
        schema=source.table_columns(),
        compute=compute,
        column_descriptions={c.name: c.description for c in source.columns if c.description},
        landing_source=contract,
        derive=derive,
        derive_spark=_date_of_spark(pairs) if pairs else None,
        code_version=source.code_version,
        partitions_def=daily_partitions(source.first_day, source.last_day)
        if isinstance(source, DailySource)
        else None,
        group_name=source.group,
        owners=tuple(source.owners),
        value_rules=(*contract.check_rules, *source.derived_rules()),
        quarantine_share=source.checks.quarantine_share,
        blocking_checks=source.checks.blocking,
        z_order=tuple(source.z_order),
        change_data_feed=source.change_data_feed,
        max_days_per_run=source.backfill.max_days_per_run
        if isinstance(source, DailySource)
        else None,
        writers=source.backfill.writers if isinstance(source, DailySource) else 1,
        # Where the partitions end changes no day's rows or checks: a moved last_day (e.g.
        # IDEM_TPCH_LAST_DAY) keeps the results proven so far.
        declaration=source.model_dump_json(exclude={"last_day"}),
    )


def _description(source: LandingSource) -> str:
    if source.description:
        return source.description
    strategy = source.resolved_strategy
    how = {
        "overwrite": "replacing exactly the run's days in one Delta commit",
        "merge": f"merged on {', '.join(source.natural_key)}",
        "replace": "replacing the whole table atomically",
        "history": f"kept as a history of each {', '.join(source.natural_key)} (SCD type 2)",
    }[strategy]
    return f"The {source.name} landing source, {how}."


def source_asset(source: LandingSource) -> dg.AssetsDefinition:
    """The asset of a declared source: reads its landing files, written by the IO manager."""
    definition = lake_asset_def(source)
    description = _description(source)
    if isinstance(source, SnapshotSource):

        @lake_asset(definition, description=description)
        def _snapshot(
            context: dg.AssetExecutionContext, lake: LakeResource, checkpoint: CheckpointResource
        ) -> TableOutput:
            return landing_output(context, lake, checkpoint, definition, Window())

        return _snapshot

    @lake_asset(definition, description=description)
    def _daily(
        context: dg.AssetExecutionContext,
        config: EngineConfig,
        lake: LakeResource,
        checkpoint: CheckpointResource,
        spark: SparkResource,
    ) -> TableOutput:
        window = Window(*partition_dates(context))
        engine = spark if config.engine == "spark" else None
        return landing_output(context, lake, checkpoint, definition, window, spark=engine)

    return _daily


def source_sensor(source: LandingSource) -> dg.SensorDefinition:
    """The landing sensor of a declared source (stopped until someone turns it on)."""
    definition = lake_asset_def(source)
    contract = definition.landing_source
    assert contract is not None
    assets = [
        definition.key,
        *(dg.AssetKey.from_user_string(a) for a in source.sensor.also_request),
    ]
    interval = source.sensor.minimum_interval_seconds
    if definition.partitions_def is None:
        return snapshot_landing_sensor(contract, assets, interval)
    return daily_landing_sensor(contract, definition.partitions_def, assets, interval)


def source_definitions(source: LandingSource) -> dg.Definitions:
    """Everything a declared source yields: asset (with its checks) and landing sensor."""
    return dg.Definitions(assets=[source_asset(source)], sensors=[source_sensor(source)])
