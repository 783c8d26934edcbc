"""The IO manager: every asset output becomes one idempotent, tracked Delta write."""

import time
from typing import Any

import dagster as dg
import polars as pl
from pydantic import Field

from idem_assets.faults import crash_point
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.strategies import (
    PreparedBatch,
    Window,
    prepare,
    read,
    slice_conditions,
    write,
)
from idem_assets.io_manager.tracking import LakeWriteLog, lease_heartbeat, window_id
from idem_assets.lake import LakeTable, WriteResult, files_signature
from idem_assets.partitions import window_dates
from idem_assets.resources import CheckpointResource, LakeResource


def output_window(context: dg.OutputContext | dg.InputContext) -> Window:
    """The day range an output (or input) covers; empty window when unpartitioned."""
    if not context.has_asset_partitions:
        return Window()
    start, end = window_dates(context.asset_partitions_time_window)
    return Window(start, end)


def target_table(lake: LakeResource, spec: WriteSpec, asset_key: dg.AssetKey) -> LakeTable:
    """The Delta table an asset writes: ``spec.table`` or its asset key path."""
    return lake.table(spec.table or "/".join(asset_key.path))


def write_metadata(spec: WriteSpec, batch: PreparedBatch, result: WriteResult, window: Window,
                   seconds: float) -> dict[str, Any]:
    """Materialization metadata for one write: what was written, where, and its fingerprint."""
    return {
        "strategy": spec.strategy,
        "table_uri": dg.MetadataValue.path(result.table_uri),
        "partition_range": window.label(),
        "delta_version": result.version,
        "committed": result.committed,
        "fingerprint": str(result.fingerprint),
        "dagster/row_count": batch.rows.num_rows,
        "rows_written": result.rows_written,
        "rows_inserted": result.rows_inserted,
        "rows_updated": result.rows_updated,
        "input_rows": batch.input_rows,
        "duplicates_dropped": batch.duplicates_dropped,
        "conflicting_keys": batch.conflicting_keys,
        "write_attempts": result.attempts,
        "write_seconds": round(seconds, 3),
        # How a no-op was proven: "checkpoint" (files unchanged since the last settled
        # write, no data read) or "content" (compared with the stored rows).
        "no_op_proof": ("" if result.committed
                        else str(result.details.get("proven_by", "content"))),
    }


class IdempotentDeltaIOManager(dg.ConfigurableIOManager):
    """Writes each output with the strategy in its asset's ``idem/*`` metadata.

    A rerun with unchanged content commits nothing; a backfill range is one
    commit; partition predicates come from validated dates only. Every write is a
    checkpoint record claimed before the commit and settled after it.
    """

    lake: dg.ResourceDependency[LakeResource]
    checkpoint: dg.ResourceDependency[CheckpointResource]
    write_lease_seconds: float = Field(
        default=60.0,
        description="Lease on a write's checkpoint record, renewed while the write runs; a "
        "crashed run's record is reconciled this long after it stopped renewing.",
    )

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Deduplicate per spec, write idempotently and tracked, attach the write's metadata."""
        if obj is None:
            return
        spec = WriteSpec.from_metadata(context.definition_metadata)
        target = target_table(self.lake, spec, context.asset_key)
        window = output_window(context)
        started = time.perf_counter()
        batch = prepare(spec, obj)
        batch_fp = batch.fingerprint
        asset = context.asset_key.to_user_string()
        with self.checkpoint.open() as store:
            log = LakeWriteLog(store, asset, window_id(window.start, window.end),
                               context.run_id, self.write_lease_seconds)
            reconciled = log.reconcile(target.open())
            for item in reconciled:
                context.log.warning(
                    f"reconciled write record {item.record_id} of a run that stopped: "
                    + ("its commit landed as version " + str(item.committed_version)
                       if item.committed_version is not None else "it never committed")
                )
            claim = log.begin({"fingerprint": str(batch_fp), "window": window.label()})
            crash_point(f"lake.before_write/{asset}")
            conditions = slice_conditions(spec, window, batch)
            try:
                with lease_heartbeat(self.checkpoint.resolved_url, claim,
                                     self.write_lease_seconds):
                    result = write(
                        spec, target, batch, window,
                        commit_metadata={
                            "idem.asset": asset,
                            "idem.window": window.label(),
                            "idem.run_id": context.run_id,
                            **log.commit_metadata(claim),
                        },
                        settled=log.last_settled(),
                        conditions=conditions,
                    )
            except BaseException as error:
                log.fail(claim, error)
                raise
            crash_point(f"lake.after_commit/{asset}")
            # Sign the slice as of our own version: a later writer's files must not be
            # credited with our fingerprint.
            files = files_signature(target.open(result.version), conditions)
            log.succeed(claim, {"fingerprint": str(result.fingerprint), "files": files,
                                "version": result.version, "committed": result.committed})
        seconds = time.perf_counter() - started
        metadata = write_metadata(spec, batch, result, window, seconds)
        metadata["reconciled_records"] = len(reconciled)
        context.add_output_metadata(metadata)
        context.log.info(
            f"{spec.strategy} {target.uri} {window.label()}: "
            + (f"committed version {result.version}" if result.committed
               else f"unchanged, no commit (version {result.version})")
        )

    def load_input(self, context: dg.InputContext) -> Any:
        """Read the upstream table for the input's partitions, as Arrow or Polars."""
        upstream = context.upstream_output
        assert upstream is not None and upstream.asset_key is not None
        spec = WriteSpec.from_metadata(upstream.definition_metadata)
        target = target_table(self.lake, spec, upstream.asset_key)
        rows = read(spec, target, output_window(context), None)
        if context.dagster_type.typing_type is pl.DataFrame:
            return pl.from_arrow(rows)
        return rows
