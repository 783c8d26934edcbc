"""The IO manager: every asset output becomes one idempotent, tracked Delta write."""

import time
from typing import Any

import dagster as dg
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable
from pydantic import Field

from idem_assets.faults import crash_point
from idem_assets.io_manager.engines import SparkWrite, is_spark_frame, write_spark
from idem_assets.io_manager.output import StaleSkipError, TableOutput
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.strategies import (
    PreparedBatch,
    Window,
    prepare,
    read,
    require_streamable,
    slice_conditions,
    write,
    write_stream,
)
from idem_assets.io_manager.tracking import (
    LakeWriteLog,
    encode_conditions,
    lease_heartbeat,
    window_id,
)
from idem_assets.lake import LakeTable, WriteResult, date_range, files_signature
from idem_assets.lake.predicates import Condition
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


def write_metadata(spec: WriteSpec, batch: PreparedBatch | None, result: WriteResult,
                   window: Window) -> dict[str, Any]:
    """Materialization metadata for one write: what was written, where, and its fingerprint.

    ``batch`` is None for a streamed write, whose rows were counted on their way through.
    """
    rows = result.fingerprint.rows if batch is None else batch.rows.num_rows
    return {
        "strategy": spec.strategy,
        "table_uri": dg.MetadataValue.path(result.table_uri),
        "partition_range": window.label(),
        "delta_version": result.version,
        "committed": result.committed,
        "fingerprint": str(result.fingerprint),
        "dagster/row_count": rows,
        "rows_written": result.rows_written,
        "rows_inserted": result.rows_inserted,
        "rows_updated": result.rows_updated,
        "input_rows": rows if batch is None else batch.input_rows,
        "duplicates_dropped": 0 if batch is None else batch.duplicates_dropped,
        "conflicting_keys": 0 if batch is None else batch.conflicting_keys,
        "streamed": batch is None,
        "write_attempts": result.attempts,
        # How a no-op was proven: "checkpoint" (files unchanged since the last settled
        # write, no data read) or "content" (compared with the stored rows).
        "no_op_proof": ("" if result.committed
                        else str(result.details.get("proven_by", "content"))),
    }


def spark_metadata(spec: WriteSpec, outcome: SparkWrite, window: Window) -> dict[str, Any]:
    """Materialization metadata of a write done by the Spark engine."""
    result = outcome.result
    return {
        "strategy": spec.strategy,
        "engine": "spark",
        "table_uri": dg.MetadataValue.path(result.table_uri),
        "partition_range": window.label(),
        "delta_version": result.version,
        "committed": result.committed,
        "fingerprint": str(result.fingerprint),
        "dagster/row_count": result.fingerprint.rows,
        "rows_written": result.rows_written,
        "rows_inserted": result.rows_inserted,
        "rows_updated": result.rows_updated,
        "duplicates_dropped": outcome.duplicates_dropped,
        "conflicting_keys": outcome.conflicting_keys,
        "write_attempts": result.attempts,
        "no_op_proof": "" if result.committed else "content",
    }


def spark_conditions(spec: WriteSpec, window: Window) -> list[Condition]:
    """The slice a Spark write covers: its partitions (merge: the whole table)."""
    if spec.strategy == "overwrite" and window.start and window.end and spec.partition_column:
        return [date_range(spec.partition_column, window.start, window.end)]
    return []


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
        output = obj if isinstance(obj, TableOutput) else TableOutput(obj)
        spec = WriteSpec.from_metadata(context.definition_metadata)
        target = target_table(self.lake, spec, context.asset_key)
        window = output_window(context)
        started = time.perf_counter()
        asset = context.asset_key.to_user_string()
        with self.checkpoint.open() as store:
            log = LakeWriteLog(store, asset, window_id(window.start, window.end),
                               context.run_id, self.write_lease_seconds)
            table = target.open()
            reconciled = log.reconcile(table)
            for item in reconciled:
                context.log.warning(
                    f"reconciled write record {item.record_id} of a run that stopped: "
                    + ("its commit landed as version " + str(item.committed_version)
                       if item.committed_version is not None else "it never committed")
                )
            if output.unchanged:
                metadata = self._confirm_unchanged(log, spec, target, table, window, output)
            else:
                metadata = self._write(context, log, spec, target, window, output)
        metadata["write_seconds"] = round(time.perf_counter() - started, 3)
        metadata["reconciled_records"] = len(reconciled)
        context.add_output_metadata(metadata)
        context.log.info(
            f"{spec.strategy} {target.uri} {window.label()}: "
            + (f"committed version {metadata['delta_version']}" if metadata["committed"]
               else f"unchanged, no commit (version {metadata['delta_version']}, proven by "
                    f"{metadata['no_op_proof']})")
        )

    def _write(self, context: dg.OutputContext, log: LakeWriteLog, spec: WriteSpec,
               target: LakeTable, window: Window, output: TableOutput) -> dict[str, Any]:
        """Prepare, claim, write (or prove a no-op) and settle; the write's metadata."""
        asset = context.asset_key.to_user_string()
        spark = is_spark_frame(output.rows)
        stream = isinstance(output.rows, pa.RecordBatchReader)
        if stream:
            require_streamable(spec)
        # Bookkeeping first: once the batch is prepared its fingerprint is being hashed on
        # another thread, and the write should start without waiting for the checkpoint.
        claim = log.begin({"window": window.label()})
        settled = log.last_settled()
        crash_point(f"lake.before_write/{asset}")
        commit_metadata = {"idem.asset": asset, "idem.window": window.label(),
                           "idem.run_id": context.run_id, **log.commit_metadata(claim)}
        try:
            batch = None if spark or stream else prepare(spec, output.rows)
            with lease_heartbeat(self.checkpoint.resolved_url, claim, self.write_lease_seconds):
                if stream:
                    result = write_stream(spec, target, output.rows, window, output.schema,
                                          commit_metadata, settled=settled)
                elif batch is None:
                    outcome = write_spark(spec, target, output.rows, window, output.schema,
                                          commit_metadata)
                    result = outcome.result
                else:
                    result = write(spec, target, batch, window, commit_metadata,
                                   settled=settled,
                                   conditions=slice_conditions(spec, window, batch))
        except BaseException as error:
            log.fail(claim, error)
            raise
        crash_point(f"lake.after_commit/{asset}")
        conditions = (spark_conditions(spec, window) if spark
                      else slice_conditions(spec, window, batch))
        # Sign the slice as of our own version: a later writer's files must not be
        # credited with our fingerprint.
        files = files_signature(target.open(result.version), conditions)
        rows = result.fingerprint.rows if batch is None else batch.rows.num_rows
        metadata_duplicates = (outcome.duplicates_dropped if spark
                               else batch.duplicates_dropped if batch is not None else 0)
        log.succeed(claim, {"fingerprint": str(result.fingerprint), "files": files,
                            "version": result.version, "committed": result.committed,
                            "rows": rows, "input_signature": output.input_signature,
                            "input_hashes": dict(output.input_hashes or {}),
                            "conditions": encode_conditions(conditions),
                            "duplicates_dropped": int(metadata_duplicates)})
        if spark:
            metadata = spark_metadata(spec, outcome, window)
        else:
            metadata = write_metadata(spec, batch, result, window)
        if output.input_signature:
            metadata["input_signature"] = output.input_signature
        return metadata

    def _confirm_unchanged(self, log: LakeWriteLog, spec: WriteSpec, target: LakeTable,
                           table: DeltaTable | None, window: Window,
                           output: TableOutput) -> dict[str, Any]:
        """Record a skip on unchanged inputs, if the slice is still what was settled."""
        settled = log.last_settled()
        if (settled is None or table is None or settled.input_signature != output.input_signature
                or files_signature(table, settled.conditions) != settled.files):
            raise StaleSkipError(
                f"{target.uri} {window.label()} changed after the asset found its inputs "
                "unchanged; rerun the partition to recompute it"
            )
        claim = log.begin({"fingerprint": settled.fingerprint, "window": window.label()})
        log.succeed(claim, {"fingerprint": settled.fingerprint, "files": settled.files,
                            "version": table.version(), "committed": False,
                            "rows": settled.rows, "input_signature": settled.input_signature,
                            "input_hashes": dict(output.input_hashes or settled.input_hashes),
                            "conditions": encode_conditions(settled.conditions),
                            "duplicates_dropped": settled.duplicates_dropped})
        return {
            "strategy": spec.strategy,
            "table_uri": dg.MetadataValue.path(target.uri),
            "partition_range": window.label(),
            "delta_version": table.version(),
            "committed": False,
            "fingerprint": settled.fingerprint,
            "dagster/row_count": settled.rows,
            "rows_written": 0,
            "duplicates_dropped": settled.duplicates_dropped,
            "no_op_proof": "inputs",
            "input_signature": settled.input_signature,
        }

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
