"""Stream checks: the table holds every committed micro-batch exactly once."""

import dagster as dg

from idem_assets.defs.stream.assets import STREAM, events_stream
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.stream.audit import audit_stream

EXACTLY_ONCE_CHECK = "stream_exactly_once"


@dg.asset_check(
    asset=events_stream,
    name=EXACTLY_ONCE_CHECK,
    description="Every batch the offset log marks succeeded is in the table with exactly its "
    "committed row count and only its own files, no rows belong to unfinished batches, and "
    "the Delta txn version has reached the last finished batch.",
)
def stream_exactly_once(lake: LakeResource, checkpoint: CheckpointResource) -> dg.AssetCheckResult:
    """Compare the stream table with its offset log, batch by batch."""
    with checkpoint.open() as store:
        audit = audit_stream(store, STREAM, lake.table(STREAM.name))
    return dg.AssetCheckResult(
        passed=audit.passed,
        metadata={
            "batches": audit.batches,
            "rows": audit.rows,
            "txn_version": audit.txn_version if audit.txn_version is not None else -1,
            "problems": dg.MetadataValue.json(list(audit.problems)),
        },
    )


STREAM_CHECKS = [stream_exactly_once]
