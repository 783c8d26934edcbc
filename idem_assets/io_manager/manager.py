"""The IO manager: every output becomes one idempotent, tracked Delta write.

It is constructed like dagster-deltalake's IO managers (``root_uri``, ``storage_options``,
``schema``) and reads their ``partition_expr`` metadata, or with the project's
``LakeResource``; ``idem/*`` metadata (merge, keys, version, dedupe) refines either.
"""

from __future__ import annotations

import time
from typing import Any

import dagster as dg

from idem_assets.faults import crash_point
from idem_assets.io_manager.config import DeltaIOManagerConfig, ResolvedWrite, upstream_mode
from idem_assets.io_manager.delta_modes import WriteMode
from idem_assets.io_manager.inputs import read_input
from idem_assets.io_manager.metadata import RowCounts, output_metadata
from idem_assets.io_manager.noop import same_inputs
from idem_assets.io_manager.output import StaleSkipError
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.tracking import LakeWriteLog, Settlement
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes import WriteRequest
from idem_assets.lake import Commit, Fingerprint, LakeTable, Proof, WriteResult, slice_signature
from idem_assets.lake.change_data import keep_change_feed
from idem_assets.lake.tables import table_schema
from idem_assets.partitions import window_dates
from idem_assets.resources import LakeResource


def output_window(context: dg.OutputContext | dg.InputContext) -> Window:
    """The day range an output (or input) covers; empty window when unpartitioned."""
    if not context.has_asset_partitions:
        return Window()
    start, end = window_dates(context.asset_partitions_time_window)
    return Window(start, end)


def target_table(lake: LakeResource, spec: WriteSpec, asset_key: dg.AssetKey) -> LakeTable:
    """The Delta table an asset writes in the project lake: ``spec.table`` or its key path."""
    return lake.table(spec.table or "/".join(asset_key.path))


class IdempotentDeltaIOManager(DeltaIOManagerConfig):
    """Delta tables written so a rerun changes nothing, and proven so.

    A drop-in for dagster-deltalake's ``DeltaLakePyarrowIOManager`` (and its pandas and
    polars siblings): the same construction, the same table locations, the same
    ``partition_expr`` metadata. A partitioned output replaces exactly its partitions (any
    time window, static, dynamic or multi-partitions; a backfill range in one commit); an
    unpartitioned one replaces its table atomically. A rerun with unchanged content commits
    nothing; predicates come from validated values only; every write is a checkpoint
    record claimed before the commit and settled after it.

    Example:
        >>> import tempfile
        >>> import dagster as dg
        >>> import pyarrow as pa
        >>> from dagster_deltalake import LocalConfig
        >>> from idem_assets import CheckpointResource, IdempotentDeltaIOManager
        >>> @dg.asset
        ... def prices() -> pa.Table:
        ...     return pa.table({"sku": [1, 2], "price": [9.5, 3.0]})
        >>> lake = tempfile.mkdtemp()
        >>> io_manager = IdempotentDeltaIOManager(
        ...     root_uri=lake,
        ...     storage_options=LocalConfig(),
        ...     checkpoint=CheckpointResource(url=f"sqlite:///{lake}/checkpoint.db"),
        ... )
        >>> def materialize() -> tuple[bool, int]:
        ...     done = dg.materialize([prices], resources={"io_manager": io_manager})
        ...     meta = done.asset_materializations_for_node("prices")[0].metadata
        ...     return meta["committed"].value, meta["delta_version"].value
        >>> materialize()  # the first run commits version 0
        (True, 0)
        >>> materialize()  # a rerun with the same rows commits nothing
        (False, 0)
    """

    # --- writing ------------------------------------------------------------------------

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Resolve the output's write, run it tracked (or confirm a skip), report it."""
        if obj is None:
            return
        write = self._resolve(context, obj)  # config.py: strategy, table, covered partitions
        started = time.perf_counter()
        with self._checkpoint().open() as store:
            log = LakeWriteLog(
                store, write.name, write.covered.label, context.run_id, self.write_lease_seconds
            )
            reconciled = log.reconcile(write.table)
            for item in reconciled:
                context.log.warning(
                    f"reconciled write record {item.record_id} of a run that stopped: "
                    + (
                        "its commit landed as version " + str(item.landed_version)
                        if item.landed_version is not None
                        else "it never committed"
                    )
                )
            if write.output.unchanged:
                metadata = self._confirm_unchanged(log, write)
            else:
                metadata = self._write(context, log, write)
        metadata["write_seconds"] = round(time.perf_counter() - started, 3)
        metadata["reconciled_records"] = len(reconciled)
        metadata.setdefault("dagster/table_name", write.name.replace("/", "."))
        context.add_output_metadata(metadata)
        context.log.info(
            f"{write.strategy.label} {write.target.uri} {write.covered.display}: "
            + (
                f"committed version {metadata['delta_version']}"
                if metadata["committed"]
                else f"unchanged, no commit (version {metadata['delta_version']}, proven by "
                f"{metadata['no_op_proof']})"
            )
        )

    def _write(
        self, context: dg.OutputContext, log: LakeWriteLog, write: ResolvedWrite
    ) -> dict[str, Any]:
        """The one frame of every write, whatever its strategy, mode or engine: prepare,
        claim, write (or prove a no-op) holding the claim, settle; the write's metadata."""
        strategy, target, covered = write.strategy, write.target, write.covered
        checkpoint = self._checkpoint()
        # 1. Prepare (writes/strategy.py): erased rows out, a table deduplicated and its
        # fingerprint hashed on another thread while the checkpoint is written. A bad
        # output fails here, on a record that never claimed anything.
        try:
            prepared = strategy.prepare_output(write.output, covered, log.store)
        except BaseException as error:
            log.fail(log.begin({"window": covered.display}), error)
            raise
        # 2. Claim (tracking.py): the record, and the lease token the commit carries.
        claim = log.begin({"window": covered.display, strategy.reported_as: strategy.label})
        entries = {
            **self._commit_metadata(context, write.name, covered),
            **log.commit_metadata(claim),
        }
        request = WriteRequest(
            write.name,
            target,
            covered,
            Commit(entries, strategy.options(self._write_options(context))),
            log.last_settled(),
            erased_rows=prepared.filtered.removed_fingerprint,
        )
        keep_change_feed(write.table, request.commit.options.table_config)
        crash_point(f"lake.before_write/{write.name}")
        # 3. Write (writes/<kind>.py -> lake/<kind>.py -> lake/commits.py), holding the claim.
        with log.holding(claim, checkpoint.resolved_url, checkpoint.clock()):
            done = strategy.write_prepared(request, prepared)
        # 4. Settle (tracking.py), signing the slice as of our own version: a later writer's
        # files must not be credited with our fingerprint.
        result = done.result
        with log.settling(claim, result.version, result.committed):
            crash_point(f"lake.after_commit/{write.name}")
            table = write.table
            signed = (
                table
                if table is not None and table.version() == result.version
                else target.open(result.version)
            )
            log.settle(
                claim,
                Settlement(
                    fingerprint=strategy.record_key(result.fingerprint),
                    files=slice_signature(signed, done.touched),
                    version=result.version,
                    committed=result.committed,
                    rows=done.counts.rows,
                    input_signature=write.output.input_signature,
                    conditions=done.touched,
                    duplicates_dropped=int(done.counts.duplicates_dropped),
                ),
            )
        declared = "dagster/column_schema" in (context.definition_metadata or {})
        metadata = output_metadata(
            (strategy.reported_as, strategy.label),
            result,
            covered.display,
            done.counts,
            engine=prepared.engine,
            columns=None if declared or signed is None else table_schema(signed),
        )
        if write.output.input_signature:
            metadata["input_signature"] = write.output.input_signature
        if strategy.erasable_keys:
            removed = prepared.filtered.removed
            metadata["erased_rows_filtered"] = removed if removed is not None else "n/a"
        return metadata

    def _confirm_unchanged(self, log: LakeWriteLog, write: ResolvedWrite) -> dict[str, Any]:
        """Record a skip on unchanged inputs, if the slice is still what was settled."""
        strategy, target, table, covered = write.strategy, write.target, write.table, write.covered
        settled = log.last_settled()
        if (
            settled is None
            or table is None
            or not same_inputs(settled, write.output.input_signature, lambda: table)
        ):
            raise StaleSkipError(
                f"{target.uri} {covered.display} changed after the asset found its inputs "
                "unchanged; rerun the partition to recompute it"
            )
        claim = log.begin({"fingerprint": settled.fingerprint, "window": covered.display})
        log.settle(
            claim,
            Settlement(
                fingerprint=settled.fingerprint,
                files=settled.files,
                version=table.version(),
                committed=False,
                rows=settled.rows,
                input_signature=settled.input_signature,
                conditions=settled.conditions,
                duplicates_dropped=settled.duplicates_dropped,
            ),
        )
        # Nothing was computed: the fingerprint reported is the settled write's, as stored.
        skipped = WriteResult.unchanged(
            strategy.label,
            target.uri,
            table.version(),
            Fingerprint(settled.rows, ""),
            proof=Proof.INPUTS,
        )
        metadata = output_metadata(
            (strategy.reported_as, strategy.label),
            skipped,
            covered.display,
            RowCounts(settled.rows, settled.duplicates_dropped),
            fingerprint=settled.fingerprint,
        )
        metadata["input_signature"] = settled.input_signature
        return metadata

    # --- reading ------------------------------------------------------------------------

    def _read_spec(self, upstream: dg.OutputContext, partitioned: bool) -> WriteSpec:
        """Where the upstream output was written and which column holds its partitions."""
        metadata = upstream.definition_metadata or {}
        if upstream_mode(upstream, self.mode) in (
            WriteMode.overwrite,
            WriteMode.create_or_replace,
        ):
            return WriteSpec.for_output(metadata, partitioned)
        expr = getattr(metadata.get("partition_expr"), "value", metadata.get("partition_expr"))
        table = getattr(metadata.get("idem/table"), "value", metadata.get("idem/table"))
        return WriteSpec(
            strategy="append",
            dedupe=False,
            partition_expr=dict(expr) if isinstance(expr, dict) else expr,
            table=table,
        )

    def load_input(self, context: dg.InputContext) -> Any:
        """The upstream rows of the input's (mapped) partitions, as the input's annotation."""
        upstream = context.upstream_output
        assert upstream is not None
        spec = self._read_spec(upstream, context.has_asset_partitions)
        target, _ = self._table(upstream, spec)
        return read_input(context, spec, target)
