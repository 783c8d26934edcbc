"""Stream sensor: a run when new files or a due batch wait, never twice for the same work."""

import dagster as dg

from idem_assets.defs.stream.assets import STREAM
from idem_assets.defs.stream.jobs import events_stream_job
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.stream import StreamSettings, outlook

_DEFAULTS = StreamSettings()
# The files one run with the default config takes: the run key names exactly those.
LOOKAHEAD_FILES = _DEFAULTS.max_files_per_batch * _DEFAULTS.max_batches_per_run


@dg.sensor(
    job=events_stream_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Requests an events_stream run when unassigned files arrive (run key = digest "
    "of their names, sizes and ETags or mtimes, from a listing: nothing is downloaded) or when "
    "the oldest open batch is due again (run key = batch and attempt). The same work never "
    "triggers twice; each new file triggers once.",
)
def events_stream_sensor(
    context: dg.SensorEvaluationContext, lake: LakeResource, checkpoint: CheckpointResource
) -> dg.SensorResult:
    """A run request for new stream files or a due batch."""
    with checkpoint.open() as store:
        look = outlook(store, STREAM, lake.landing(), LOOKAHEAD_FILES)
    key = look.run_key()
    if key is None:
        reason = (
            "no new files"
            if look.head is None
            else (f"batch {look.head.seq} is {look.head.tracker.status} and not due")
        )
        return dg.SensorResult(skip_reason=reason, cursor=context.cursor)
    if key == context.cursor:
        return dg.SensorResult(skip_reason=f"already requested {key}", cursor=key)
    request = dg.RunRequest(
        run_key=key, tags={"idem/trigger": "stream", "idem/source": STREAM.name}
    )
    return dg.SensorResult(run_requests=[request], cursor=key)
