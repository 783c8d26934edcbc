"""events_stream: new stream files appended to Delta, each micro-batch exactly once."""

from typing import Any

import dagster as dg
from pydantic import Field

from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample import EVENTS_STREAM
from idem_assets.stream import RunReport, StreamIngester, StreamSettings, StreamStep
from idem_assets.stream.offsets import MAX_FILES_PER_BATCH

STREAM = EVENTS_STREAM
_DEFAULTS = StreamSettings()


class StreamRunConfig(dg.Config):
    """How much one run of a stream asset takes, and how it holds its batch."""

    max_files_per_batch: int = Field(
        default=_DEFAULTS.max_files_per_batch,
        ge=1,
        le=MAX_FILES_PER_BATCH,
        description="Files fixed into one micro-batch (one Delta commit).",
    )
    max_batches_per_run: int = Field(
        default=_DEFAULTS.max_batches_per_run,
        ge=1,
        description="Micro-batches one run commits before it stops; the sensor asks for more.",
    )
    lease_seconds: float = Field(
        default=_DEFAULTS.lease_seconds,
        gt=0,
        description="Lease on the batch being written, renewed after every file; a crashed "
        "run's batch is taken over once it runs out.",
    )
    retry_delay_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Wait before a failed batch is tried again; unset: doubling backoff from 30 s.",
    )
    max_attempts: int = Field(
        default=_DEFAULTS.max_attempts,
        ge=1,
        description="Attempts a new batch gets before it is exhausted and needs a person.",
    )

    def settings(self) -> StreamSettings:
        """The library settings of this config."""
        return StreamSettings(
            self.max_files_per_batch,
            self.max_batches_per_run,
            self.lease_seconds,
            self.retry_delay_seconds,
            self.max_attempts,
        )


def report_metadata(report: RunReport, table_uri: str) -> dict[str, Any]:
    """Materialization metadata: batches committed / reconciled, rows, files, txn, fingerprints."""
    batches = [
        {
            "batch": o.seq,
            "status": o.status,
            "files": o.files,
            "rows": o.rows,
            "quarantined": o.quarantined,
            "raw_rows": o.raw_rows,
            "fingerprint": o.fingerprint,
            "files_signature": o.signature[:16],
            "table_version": o.table_version,
            "attempt": o.attempts,
        }
        for o in report.outcomes
    ]
    return {
        "batches_committed": report.count("committed"),
        "batches_reconciled": report.count("reconciled"),
        "rows_appended": report.rows,
        "files": report.files,
        "quarantined_rows": sum(o.quarantined for o in report.outcomes),
        "txn_version": report.txn_version if report.txn_version is not None else -1,
        "table_version": report.table_version if report.table_version is not None else -1,
        "stopped": report.stopped,
        "stopped_detail": report.detail,
        "batches": dg.MetadataValue.json(batches),
        "table_uri": dg.MetadataValue.path(table_uri),
        "strategy": "append",
    }


def _logger(context: dg.AssetExecutionContext) -> Any:
    def observe(step: StreamStep) -> None:
        if step.step in ("committed", "succeeded"):
            context.log.info(f"{STREAM.name} batch {step.seq} {step.step}: {dict(step.detail)}")
        else:
            context.log.debug(f"{STREAM.name} batch {step.seq} {step.step}: {dict(step.detail)}")

    return observe


@dg.asset(
    name=STREAM.name,
    group_name="stream",
    owners=["team:data-platform"],
    kinds={"deltalake"},
    metadata={
        "dagster/table_name": STREAM.name,
        "idem/strategy": "append",
        "idem/txn_app_id": STREAM.app_id,
        "idem/erasable_keys": list(STREAM.erasable_keys),
        "idem/landing_source": STREAM.name,
    },
    description=(
        "Append-only event log fed by <landing>/events_stream/: every run fixes the next "
        "micro-batches of new files (names and sha256) in the checkpoint store, then appends "
        "each with a Delta txn (app id events_stream, version = batch number), so a retried, "
        "crashed or concurrent run never writes a batch twice. Every delivery is kept; rows "
        "carry stream_batch and source_file. Bad rows go to quarantine (source events_stream)."
    ),
)
def events_stream(
    context: dg.AssetExecutionContext,
    config: StreamRunConfig,
    lake: LakeResource,
    checkpoint: CheckpointResource,
) -> dg.MaterializeResult:
    """Commit the stream's pending micro-batches, oldest first."""
    table = lake.table(STREAM.name)
    with checkpoint.open() as store:
        ingester = StreamIngester(
            store,
            STREAM,
            lake.landing(),
            table,
            lake.table(QUARANTINE_TABLE),
            owner=f"run:{context.run.run_id}",
            settings=config.settings(),
            observer=_logger(context),
        )
        report = ingester.run()
    if report.stopped == "busy":
        context.log.info(f"{STREAM.name}: another run holds the next batch ({report.detail})")
    return dg.MaterializeResult(metadata=report_metadata(report, table.uri))
