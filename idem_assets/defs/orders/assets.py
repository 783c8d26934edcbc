"""orders: the newest version of every order, one Delta partition per order_date."""


import dagster as dg
import pyarrow as pa

from idem_assets.defs.lake_asset import EngineConfig, LakeAssetDef, lake_asset
from idem_assets.defs.landing_io import landing_output, read_landing
from idem_assets.io_manager import TableOutput, Window, WriteSpec
from idem_assets.landing.contract import ORDERS
from idem_assets.partitions import partition_dates
from idem_assets.resources import CheckpointResource, LakeResource, SparkResource


def orders_rows(lake: LakeResource, window: Window) -> pa.Table:
    """Valid landing order rows of the window, before deduplication."""
    return read_landing(lake, ORDERS, window).rows


ORDERS_TABLE = LakeAssetDef(
    name="orders",
    spec=WriteSpec(
        strategy="overwrite",
        natural_key=("order_id",),
        version_column="updated_at",
        partition_column="order_date",
    ),
    schema=ORDERS.schema,
    compute=orders_rows,
    column_descriptions={
        "order_id": "Natural key; one row per order.",
        "amount": "Order value, decimal(18,2).",
        "status": "placed, paid, shipped, delivered, cancelled or refunded.",
        "order_date": "Delta partition column and Dagster daily partition.",
        "updated_at": "Version: the newest updated_at of an order wins.",
    },
    landing_source=ORDERS,
)


@lake_asset(
    ORDERS_TABLE,
    description=(
        "Orders landed for the day(s), re-deliveries collapsed to the newest updated_at per "
        "order_id, written by replacing exactly the run's order_date partitions in one Delta "
        "commit (replaceWhere). A rerun with unchanged landing files commits nothing."
    ),
)
def orders(
    context: dg.AssetExecutionContext,
    config: EngineConfig,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    spark: SparkResource,
) -> TableOutput:
    """Newest version of each order for the partition range."""
    window = Window(*partition_dates(context))
    engine = spark if config.engine == "spark" else None
    return landing_output(context, lake, checkpoint, ORDERS_TABLE, window, spark=engine)
