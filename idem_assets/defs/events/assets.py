"""events: every event_id held once across all days, the newest ingestion winning."""


from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from idem_assets.defs.lake_asset import EngineConfig, LakeAssetDef, lake_asset
from idem_assets.defs.landing_io import landing_output, read_landing
from idem_assets.io_manager import TableOutput, Window, WriteSpec
from idem_assets.landing.contract import EVENTS
from idem_assets.partitions import partition_dates
from idem_assets.resources import CheckpointResource, LakeResource, SparkResource

EVENTS_SCHEMA = EVENTS.schema.append(pa.field("event_date", pa.date32()))


def with_event_date(rows: pa.Table) -> pa.Table:
    """Add ``event_date`` (UTC day of event_time): the table's physical partition column."""
    return rows.append_column("event_date", pc.cast(rows.column("event_time"), pa.date32()))


def with_event_date_on_spark(rows: Any) -> Any:
    """``with_event_date`` for a Spark DataFrame (pyspark is imported only when used)."""
    from idem_assets.spark import with_event_date_spark

    return with_event_date_spark(rows)


def event_rows(lake: LakeResource, window: Window) -> pa.Table:
    """Valid events ingested in the window, with their event_date, before deduplication."""
    return with_event_date(read_landing(lake, EVENTS, window).rows)


EVENTS_TABLE = LakeAssetDef(
    name="events",
    spec=WriteSpec(
        strategy="merge",
        natural_key=("event_id",),
        version_column="ingested_at",
        partition_column="event_date",
        prune_columns=("event_date",),
    ),
    schema=EVENTS_SCHEMA,
    compute=event_rows,
    column_descriptions={
        "event_id": "Natural key; each event is held once across all days.",
        "event_time": "When the event happened (UTC). Part of its identity: never changes.",
        "ingested_at": "Version: a re-delivery on a later day replaces the stored row.",
        "event_date": "UTC day of event_time; Delta partition column used to prune the MERGE.",
    },
    landing_source=EVENTS,
    derive=with_event_date,
    derive_spark=with_event_date_on_spark,
)


@lake_asset(
    EVENTS_TABLE,
    description=(
        "Events ingested on the day(s), merged on event_id: an event delivered again on a later "
        "day stays a single row, the newest ingested_at winning. The MERGE predicate carries the "
        "batch's literal event_date range, so only the touched partitions are read."
    ),
)
def events(
    context: dg.AssetExecutionContext,
    config: EngineConfig,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    spark: SparkResource,
) -> TableOutput:
    """Events of the ingest-day range, to be merged."""
    window = Window(*partition_dates(context))
    engine = spark if config.engine == "spark" else None
    return landing_output(context, lake, checkpoint, EVENTS_TABLE, window, spark=engine)
