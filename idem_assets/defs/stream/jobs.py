"""The stream job: one run commits the stream's next micro-batches."""

import dagster as dg

from idem_assets.defs.stream.assets import events_stream

events_stream_job = dg.define_asset_job(
    name="events_stream_job",
    selection=dg.AssetSelection.assets(events_stream),
    description="Commits the events stream's next micro-batches, each exactly once.",
)
