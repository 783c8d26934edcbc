"""product_catalog: the newest full snapshot, swapped in atomically."""


import dagster as dg
import pyarrow as pa

from idem_assets.defs.lake_asset import LakeAssetDef, lake_asset
from idem_assets.defs.landing_io import landing_output, read_landing
from idem_assets.io_manager import TableOutput, Window, WriteSpec
from idem_assets.landing.contract import PRODUCT_CATALOG
from idem_assets.resources import CheckpointResource, LakeResource


def catalog_rows(lake: LakeResource, window: Window) -> pa.Table:
    """Valid rows of the newest catalog snapshot, before deduplication."""
    return read_landing(lake, PRODUCT_CATALOG, window).rows


CATALOG_TABLE = LakeAssetDef(
    name="product_catalog",
    spec=WriteSpec(strategy="replace", natural_key=("product_id",)),
    schema=PRODUCT_CATALOG.schema,
    compute=catalog_rows,
    column_descriptions={
        "product_id": "Natural key; one row per product.",
        "price": "List price, decimal(18,2).",
    },
    landing_source=PRODUCT_CATALOG,
)


@lake_asset(
    CATALOG_TABLE,
    daily=False,
    description=(
        "The newest product catalog snapshot, replacing the whole table in one Delta commit "
        "(TRUNCATE + INSERT done atomically): readers see the old or the new catalog, never an "
        "empty one. An unchanged snapshot commits nothing; an empty snapshot is refused."
    ),
)
def product_catalog(
    context: dg.AssetExecutionContext, lake: LakeResource, checkpoint: CheckpointResource
) -> TableOutput:
    """Rows of the newest catalog snapshot."""
    return landing_output(context, lake, checkpoint, CATALOG_TABLE, Window())
