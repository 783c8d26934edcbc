"""The IO manager: every output becomes one idempotent, tracked Delta write.

It is constructed like dagster-deltalake's IO managers (``root_uri``, ``storage_options``,
``schema``) and reads their ``partition_expr`` metadata, or with the project's
``LakeResource``; ``idem/*`` metadata (merge, keys, version, dedupe) refines either.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import dagster as dg
from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.checkpoint.heartbeat import lease_heartbeat
from idem_assets.faults import crash_point
from idem_assets.io_manager.config import DeltaIOManagerConfig
from idem_assets.io_manager.delta_modes import WriteMode, tables_only
from idem_assets.io_manager.handlers import handed_over, handler_for
from idem_assets.io_manager.inputs import read_input
from idem_assets.io_manager.metadata import RowCounts, output_metadata
from idem_assets.io_manager.noop import same_inputs
from idem_assets.io_manager.output import StaleSkipError, TableOutput, is_spark_frame
from idem_assets.io_manager.settings import (
    TABLE_CONFIGURATION_KEY,
    mode_of,
    mode_write,
    schema_mode_of,
    setting,
    upstream_mode,
)
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.tracking import LakeWriteLog, Settlement
from idem_assets.io_manager.window import Window
from idem_assets.io_manager.writes import (
    WriteRequest,
    WriteStrategy,
    strategy_for,
    strategy_for_mode,
)
from idem_assets.lake import (
    Commit,
    Fingerprint,
    LakeTable,
    Proof,
    WriteOptions,
    WriteResult,
    slice_signature,
)
from idem_assets.lake.change_data import keep_change_feed
from idem_assets.lake.tables import table_schema
from idem_assets.partitions import window_dates
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


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
        """Deduplicate per spec, write idempotently and tracked, attach the write's metadata."""
        if obj is None:
            return
        output = handed_over(obj if isinstance(obj, TableOutput) else TableOutput(obj))
        strategy, target, name = self._strategy_of(context, output)
        started = time.perf_counter()
        with self._checkpoint().open() as store:
            table = target.open()
            covered = strategy.covers(context, _schema_of(output, table))
            log = LakeWriteLog(store, name, covered.label, context.run_id, self.write_lease_seconds)
            reconciled = log.reconcile(table)
            for item in reconciled:
                context.log.warning(
                    f"reconciled write record {item.record_id} of a run that stopped: "
                    + (
                        "its commit landed as version " + str(item.landed_version)
                        if item.landed_version is not None
                        else "it never committed"
                    )
                )
            if output.unchanged:
                metadata = self._confirm_unchanged(log, strategy, target, table, covered, output)
            else:
                metadata = self._write(context, log, name, strategy, target, table, covered, output)
        metadata["write_seconds"] = round(time.perf_counter() - started, 3)
        metadata["reconciled_records"] = len(reconciled)
        metadata.setdefault("dagster/table_name", name.replace("/", "."))
        context.add_output_metadata(metadata)
        context.log.info(
            f"{strategy.label} {target.uri} {covered.display}: "
            + (
                f"committed version {metadata['delta_version']}"
                if metadata["committed"]
                else f"unchanged, no commit (version {metadata['delta_version']}, proven by "
                f"{metadata['no_op_proof']})"
            )
        )

    def _strategy_of(
        self, context: dg.OutputContext, output: TableOutput
    ) -> tuple[WriteStrategy, LakeTable, str]:
        """The output's write, made once: an ``idem/strategy`` bound to the output's spec or
        one of dagster-delta's modes bound to its settings; and the table it writes."""
        mode = mode_of(setting(context, "mode") or self.mode)
        if mode in (WriteMode.merge, WriteMode.append, WriteMode.error, WriteMode.ignore):
            if output.rows is None or is_spark_frame(output.rows):
                raise ValueError(tables_only(mode.value))
            plan, covered = mode_write(
                context,
                mode,
                output.rows.schema,
                merge_config=self.merge_config,
                schema_mode=self.schema_mode,
                writer_properties=self.writer_properties,
                table_config=self._table_config(context),
            )
            target, name = self._located(context, setting(context, "idem/table"))
            return strategy_for_mode(plan, covered), target, name
        metadata = context.definition_metadata or {}
        if mode is WriteMode.create_or_replace:
            if context.has_asset_partitions:
                raise ValueError(
                    "mode 'create_or_replace' replaces the whole table, and this output has "
                    "partitions; use mode 'overwrite' with partition_expr to replace them"
                )
            metadata = {**metadata, "idem/strategy": "replace", "idem/allow_empty": True}
        spec = WriteSpec.for_output(metadata, context.has_asset_partitions)
        target, name = self._table(context, spec)
        return strategy_for(spec), target, name

    def _write(
        self,
        context: dg.OutputContext,
        log: LakeWriteLog,
        name: str,
        strategy: WriteStrategy,
        target: LakeTable,
        table: DeltaTable | None,
        covered: PartitionSlice,
        output: TableOutput,
    ) -> dict[str, Any]:
        """Prepare, claim, write (or prove a no-op) and settle; the write's metadata. The one
        frame of every write, whatever its strategy or mode.

        ``table`` is the table as opened before the write, reused to sign an unchanged slice.
        """
        # The batch first: its fingerprint is then hashed on another thread while the
        # checkpoint is written, and an unchanged rerun (hash-bound) waits for it less.
        filtered = strategy.without_erased(output, log.store)
        output = filtered.output
        handler, handed = handler_for(strategy, output, covered)
        try:
            prepared = handler.prepare(strategy, handed)
        except BaseException as error:
            log.fail(log.begin({"window": covered.display}), error)
            raise
        claim = log.begin({"window": covered.display, strategy.reported_as: strategy.label})
        options = WriteOptions(**self._options_of(context))
        metadata = {**self._commit_metadata(context, name, covered), **log.commit_metadata(claim)}
        request = WriteRequest(
            name,
            target,
            covered,
            Commit(metadata, strategy.options(options)),
            log.last_settled(),
            erased_rows=filtered.removed_fingerprint,
        )
        keep_change_feed(table, request.commit.options.table_config)
        crash_point(f"lake.before_write/{name}")
        checkpoint = self._checkpoint()
        try:
            with lease_heartbeat(
                checkpoint.resolved_url, claim, self.write_lease_seconds, checkpoint.clock()
            ):
                done = prepared.write(strategy, request)
        except BaseException as error:
            log.fail(claim, error)
            raise
        result = done.result
        with log.settling(claim, result.version, result.committed):
            crash_point(f"lake.after_commit/{name}")
            # Sign the slice as of our own version: a later writer's files must not be
            # credited with our fingerprint.
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
                    input_signature=output.input_signature,
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
            engine=handler.engine,
            columns=None if declared or signed is None else table_schema(signed),
        )
        if output.input_signature:
            metadata["input_signature"] = output.input_signature
        if strategy.erasable_keys:
            removed = filtered.removed
            metadata["erased_rows_filtered"] = removed if removed is not None else "n/a"
        return metadata

    def _commit_metadata(
        self, context: dg.OutputContext, name: str, covered: PartitionSlice
    ) -> dict[str, Any]:
        """What every commit of the output carries: the configured entries, then the asset,
        its window and its run."""
        return {
            **self._commit_extras(context),
            "idem.asset": name,
            "idem.window": covered.display,
            "idem.run_id": context.run_id,
        }

    def _options_of(self, context: dg.OutputContext | None = None) -> dict[str, Any]:
        schema_mode = setting(context, "schema_mode") if context else None
        return {
            "table_config": self._table_config(context),
            "writer_properties": (setting(context, "writer_properties") if context else None)
            or self.writer_properties,
            "evolve_schema": self.overwrite_schema
            or (schema_mode_of(schema_mode or self.schema_mode) is not None),
        }

    def _table_config(self, context: dg.OutputContext | None) -> dict[str, str] | None:
        """Table configuration for a table-creating write: the asset's
        ``table_configuration`` metadata, then the manager's ``table_config`` (as in
        dagster-delta)."""
        own = setting(context, TABLE_CONFIGURATION_KEY) if context else None
        merged = {**(own or {}), **(self.table_config or {})}
        return {str(k): str(v) for k, v in merged.items()} or None

    def _confirm_unchanged(
        self,
        log: LakeWriteLog,
        strategy: WriteStrategy,
        target: LakeTable,
        table: DeltaTable | None,
        covered: PartitionSlice,
        output: TableOutput,
    ) -> dict[str, Any]:
        """Record a skip on unchanged inputs, if the slice is still what was settled."""
        settled = log.last_settled()
        if (
            settled is None
            or table is None
            or not same_inputs(settled, output.input_signature, lambda: table)
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


def _schema_of(output: TableOutput, table: DeltaTable | None) -> pa.Schema | None:
    rows = output.rows
    if isinstance(rows, pa.Table | pa.RecordBatchReader):
        return rows.schema
    if output.schema is not None:
        return output.schema
    return table_schema(table) if table is not None else None
