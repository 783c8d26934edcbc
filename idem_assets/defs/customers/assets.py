"""customers: each day's change set merged into one table on customer_id."""


import dagster as dg
import pyarrow as pa

from idem_assets.defs.lake_asset import LakeAssetDef, lake_asset
from idem_assets.defs.landing_io import landing_output, read_landing
from idem_assets.io_manager import TableOutput, Window, WriteSpec
from idem_assets.landing.contract import CUSTOMERS
from idem_assets.partitions import partition_dates
from idem_assets.resources import CheckpointResource, LakeResource


def customer_changes(lake: LakeResource, window: Window) -> pa.Table:
    """Valid customer change rows landed in the window, before deduplication."""
    return read_landing(lake, CUSTOMERS, window).rows


CUSTOMERS_TABLE = LakeAssetDef(
    name="customers",
    spec=WriteSpec(
        strategy="merge",
        natural_key=("customer_id",),
        version_column="updated_at",
        prune_columns=("customer_id",),
    ),
    schema=CUSTOMERS.schema,
    compute=customer_changes,
    column_descriptions={
        "customer_id": "Natural key; one row per customer.",
        "segment": "consumer, smb or enterprise.",
        "updated_at": "Version: a change only lands if it is newer than the stored row.",
    },
    landing_source=CUSTOMERS,
)


@lake_asset(
    CUSTOMERS_TABLE,
    description=(
        "Customer change sets merged on customer_id (MERGE). The newest updated_at wins, so a "
        "late-arriving older change never overwrites a newer one, and days can be loaded or "
        "backfilled in any order. Unchanged rows are not rewritten; a rerun commits nothing."
    ),
)
def customers(
    context: dg.AssetExecutionContext, lake: LakeResource, checkpoint: CheckpointResource
) -> TableOutput:
    """Customer changes of the partition range, to be merged."""
    window = Window(*partition_dates(context))
    return landing_output(context, lake, checkpoint, CUSTOMERS_TABLE, window)
