"""Retries and re-drives of notifications: a sensor for backoffs, a job for dead letters."""

import dagster as dg

from idem_assets.defs.notifications.assets import day_of, notifications
from idem_assets.resources import CheckpointResource

notifications_job = dg.define_asset_job(
    name="notifications_job",
    selection=dg.AssetSelection.assets(notifications),
    description="Sends the partition's due notifications (new, retried or crashed-worker ones).",
)

notifications_redrive_job = dg.define_asset_job(
    name="notifications_redrive_job",
    selection=dg.AssetSelection.assets(notifications),
    config={"ops": {"notifications": {"config": {"redrive_exhausted": True}}}},
    description="Re-drives the chosen partitions' dead letters (exhausted → pending, attempts "
    "reset) and sends them again with their original idempotency keys.",
)


@dg.sensor(
    job=notifications_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Re-requests partitions holding failed-but-retryable notifications once their "
    "backoff is over (and those whose worker died, once its lease ran out).",
)
def notification_retry_sensor(
    context: dg.SensorEvaluationContext, checkpoint: CheckpointResource
) -> dg.SensorResult:
    """One run per partition whose retries are due, keyed by the due time.

    Due is judged on the store's clock, ``checkpoint.clock()`` (the database's unless the
    resource gives another), the clock the runs set their backoffs and leases by.
    """
    assert notifications.partitions_def is not None
    valid = set(notifications.partitions_def.get_partition_keys())
    requests = []
    with checkpoint.open() as store:
        for item in store.retryable():
            day = day_of(item.scope)
            if day is None or day.isoformat() not in valid:
                continue
            requests.append(
                dg.RunRequest(
                    run_key=f"retry:{item.scope}:{int(item.next_attempt_at)}",
                    partition_key=day.isoformat(),
                    tags={"idem/trigger": "notification_retry"},
                )
            )
    return dg.SensorResult(run_requests=requests)
