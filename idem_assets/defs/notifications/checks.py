"""Checks that make dead letters and unsettled notifications visible."""

import dagster as dg

from idem_assets.checkpoint import Status
from idem_assets.defs.notifications.assets import notifications, scope_of
from idem_assets.lib.checks.window import check_window
from idem_assets.resources import CheckpointResource

NO_DEAD_LETTERS = "no_dead_letters"
ALL_SETTLED = "all_settled"
_LISTED = 50


@dg.asset_check(
    asset=notifications,
    name=NO_DEAD_LETTERS,
    description="Fails while any notification of the partition is exhausted; the metadata "
    "lists them with their last error. Re-drive with notifications_redrive_job.",
)
def no_dead_letters(
    context: dg.AssetCheckExecutionContext, checkpoint: CheckpointResource
) -> dg.AssetCheckResult:
    """No exhausted records in the partition."""
    window = check_window(context, notifications.partitions_def, notifications.key)
    with checkpoint.open() as store:
        dead = [t for day in window.days() for t in store.dead_letters(scope_of(day))]
    return dg.AssetCheckResult(
        passed=not dead,
        metadata={
            "partition_range": window.label(),
            "dead_letters": len(dead),
            "records": dg.MetadataValue.json(
                [
                    {
                        "scope": t.scope,
                        "record_id": t.record_id,
                        "attempts": t.attempts,
                        "redrives": t.redrive_count,
                        "last_error": t.last_error,
                    }
                    for t in dead[:_LISTED]
                ]
            ),
        },
    )


@dg.asset_check(
    asset=notifications,
    name=ALL_SETTLED,
    description="Every notification of the partition is settled (succeeded or ignored); a "
    "warning while some wait for a retry.",
)
def all_settled(
    context: dg.AssetCheckExecutionContext, checkpoint: CheckpointResource
) -> dg.AssetCheckResult:
    """Nothing pending, in flight or waiting for a retry."""
    window = check_window(context, notifications.partitions_def, notifications.key)
    counts: dict[str, int] = {}
    with checkpoint.open() as store:
        for day in window.days():
            for status, n in store.counts(scope_of(day)).items():
                counts[status] = counts.get(status, 0) + n
    open_statuses = (Status.PENDING, Status.IN_PROGRESS, Status.FAILED)
    unsettled = sum(counts.get(s.value, 0) for s in open_statuses)
    return dg.AssetCheckResult(
        passed=unsettled == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "partition_range": window.label(),
            "unsettled": unsettled,
            "status_counts": dg.MetadataValue.json(counts),
        },
    )


NOTIFICATION_CHECKS = [no_dead_letters, all_settled]
