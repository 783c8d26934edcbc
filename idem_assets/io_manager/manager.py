"""The IO manager: every output becomes one idempotent, tracked Delta write.

It is constructed like dagster-deltalake's IO managers (``root_uri``, ``storage_options``,
``schema``) and reads their ``partition_expr`` metadata, or with the project's
``LakeResource``; ``idem/*`` metadata (merge, keys, version, dedupe) refines either.
"""

import time
from collections.abc import Sequence
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster_deltalake import AzureConfig, GcsConfig, LocalConfig, S3Config
from dagster_deltalake.config import ClientConfig
from deltalake import DeltaTable
from pydantic import Field, field_validator, model_validator

from idem_assets.faults import crash_point
from idem_assets.io_manager.delta_modes import MergeConfig, SchemaMode, WriteMode
from idem_assets.io_manager.engines import is_spark_frame, write_spark
from idem_assets.io_manager.location import TablePath, dropin_path, lake_path
from idem_assets.io_manager.metadata import RowCounts, output_metadata
from idem_assets.io_manager.modes import write_by_mode
from idem_assets.io_manager.noop import same_inputs
from idem_assets.io_manager.output import StaleSkipError, TableOutput
from idem_assets.io_manager.settings import (
    mode_of,
    mode_write,
    schema_mode_of,
    setting,
    upstream_mode,
)
from idem_assets.io_manager.slices import (
    PartitionSlice,
    arrow_type_of,
    partition_slice,
    partitions_label,
)
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.io_manager.strategies import (
    PreparedBatch,
    Window,
    prepare,
    slice_conditions,
    streamable,
    write,
    write_stream,
)
from idem_assets.io_manager.tracking import LakeWriteLog, lease_heartbeat
from idem_assets.lake import (
    Fingerprint,
    LakeTable,
    Proof,
    WriteResult,
    date_range,
    read_rows,
    slice_signature,
)
from idem_assets.lake.frames import as_type, is_writable, to_arrow, unsupported
from idem_assets.lake.predicates import Condition, quote_identifier
from idem_assets.lake.tables import table_schema
from idem_assets.partitions import window_dates
from idem_assets.resources import CheckpointResource, LakeResource, storage_option_values


def output_window(context: dg.OutputContext | dg.InputContext) -> Window:
    """The day range an output (or input) covers; empty window when unpartitioned."""
    if not context.has_asset_partitions:
        return Window()
    start, end = window_dates(context.asset_partitions_time_window)
    return Window(start, end)


def target_table(lake: LakeResource, spec: WriteSpec, asset_key: dg.AssetKey) -> LakeTable:
    """The Delta table an asset writes in the project lake: ``spec.table`` or its key path."""
    return lake.table(spec.table or "/".join(asset_key.path))


def spark_conditions(spec: WriteSpec, window: Window) -> list[Condition]:
    """The slice a Spark write covers: its partitions (merge: the whole table)."""
    if spec.strategy == "overwrite" and window.start and window.end and spec.partition_column:
        return [date_range(spec.partition_column, window.start, window.end)]
    return []


def record_slice(
    context: dg.OutputContext | dg.InputContext, spec: WriteSpec, schema: pa.Schema | None
) -> PartitionSlice:
    """What an output's write covers, as conditions and a stable label.

    An overwrite covers exactly its partitions of the partition column(s); a merge or a
    replace covers what its strategy decides, and its partitions only name the record.
    """
    if not context.has_asset_partitions:
        return PartitionSlice.whole_table()
    if spec.strategy == "overwrite":
        return partition_slice(context, spec.partition_columns, arrow_type_of(schema))
    label, days = partitions_label(context)
    return PartitionSlice((), (), label, days)


class IdempotentDeltaIOManager(dg.ConfigurableIOManager):
    """Delta tables written so a rerun changes nothing, and proven so.

    A drop-in for dagster-deltalake's ``DeltaLakePyarrowIOManager`` (and its pandas and
    polars siblings): the same construction, the same table locations, the same
    ``partition_expr`` metadata. A partitioned output replaces exactly its partitions (any
    time window, static, dynamic or multi-partitions; a backfill range in one commit); an
    unpartitioned one replaces its table atomically. A rerun with unchanged content commits
    nothing; predicates come from validated values only; every write is a checkpoint
    record claimed before the commit and settled after it.
    """

    root_uri: str | None = Field(
        default=None,
        description="Storage location of the Delta tables, as dagster-deltalake's root_uri: "
        "tables at <root>/<schema>/<table>. Leave unset to use `lake` instead.",
    )
    storage_options: AzureConfig | S3Config | LocalConfig | GcsConfig = Field(
        default=LocalConfig(),
        discriminator="provider",
        description="dagster-deltalake's storage configuration for root_uri (pass "
        "credentials as dg.EnvVar).",
    )
    client_options: ClientConfig | None = Field(
        default=None, description="dagster-deltalake's http client configuration."
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Schema (parent folder) of every table, as in dagster-deltalake.",
    )
    mode: WriteMode = Field(
        default=WriteMode.overwrite,
        description="How outputs are written, as in dagster-delta: overwrite (replace exactly "
        "the output's partitions, or its table), merge (merge_config), append (exactly once "
        "per output), error (create; a rerun of the same rows is a no-op), ignore (create "
        "if absent) or create_or_replace (replace the whole table). An asset's 'mode' "
        "metadata overrides it. Every mode commits nothing on an unchanged rerun.",
    )
    merge_config: MergeConfig | None = Field(
        default=None,
        description="dagster-delta's MergeConfig for mode='merge': merge_type, predicate, "
        "aliases; an asset's 'merge_predicate' and 'merge_operations_config' override it.",
    )
    schema_mode: SchemaMode | None = Field(
        default=None,
        description="merge: add an output's new columns to the table (stored rows read "
        "null), in every mode; overwrite: let a replace change the table's columns.",
    )
    commit_properties: dict[str, Any] | None = Field(
        default=None,
        description="delta-rs CommitProperties fields; custom_metadata entries are added to "
        "every commit (commit retries stay ours).",
    )
    writer_engine: str = Field(
        default="rust",
        description="Accepted for dagster-deltalake compatibility: deltalake "
        "1.x writes with its Rust engine whatever this says.",
    )
    overwrite_schema: bool = Field(
        default=False,
        description="Let an output change its table's columns (a replace "
        "overwrites the schema; a partition overwrite adds new columns).",
    )
    table_config: dict[str, str] | None = Field(
        default=None, description="Delta table configuration set when a table is created."
    )
    custom_metadata: dict[str, str] | None = Field(
        default=None, description="Entries added to every commit's metadata."
    )
    writer_properties: dict[str, str] | None = Field(
        default=None, description="Parquet writer properties (delta-rs WriterProperties)."
    )
    lake: LakeResource | None = Field(
        default=None,
        description="The project's lake: tables at <lake>/<asset key path>. "
        "Used when root_uri is unset.",
    )
    checkpoint: CheckpointResource | None = Field(
        default=None,
        description="Where write records are kept. Unset: IDEM_STATE_URL, else "
        "SQLite in <root>/_idem_state/ for a local root (see docs/migrating.md for object "
        "storage).",
    )
    write_lease_seconds: float = Field(
        default=60.0,
        description="Lease on a write's checkpoint record, renewed while the write runs; a "
        "crashed run's record is reconciled this long after it stopped renewing.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> WriteMode:
        return mode_of(value)

    @model_validator(mode="after")
    def _merge_configured(self) -> "IdempotentDeltaIOManager":
        if self.mode is WriteMode.merge and self.merge_config is None:
            raise ValueError(
                "mode='merge' needs merge_config, e.g. MergeConfig(merge_type=MergeType.upsert, "
                "predicate='s.id = t.id', source_alias='s', target_alias='t')"
            )
        return self

    # --- where tables are ---------------------------------------------------------------

    def _root(self) -> str | None:
        return self.root_uri.rstrip("/") if self.root_uri else None

    def _options(self) -> dict[str, str]:
        return storage_option_values(self.storage_options, self.client_options)

    def _path(self, context: dg.OutputContext, table: str | None) -> TablePath:
        if self._root() is not None:
            located = dropin_path(context, self.schema_)
        else:
            located = lake_path(context)
        if table:
            return TablePath(table, located.name)
        return located

    def _table(self, context: dg.OutputContext, spec: WriteSpec) -> tuple[LakeTable, str]:
        return self._located(context, spec.table)

    def _located(self, context: dg.OutputContext, table: str | None) -> tuple[LakeTable, str]:
        located = self._path(context, table)
        root = self._root()
        if root is not None:
            return LakeTable(f"{root}/{located.path}", self._options()), located.name
        lake = self.lake or LakeResource()
        return lake.table(located.path), located.name

    def _checkpoint(self) -> CheckpointResource:
        if self.checkpoint is not None:
            return self.checkpoint
        root = self._root()
        return CheckpointResource.beside(root) if root is not None else CheckpointResource()

    def _commit_extras(self, context: dg.OutputContext) -> dict[str, str]:
        """The configured commit metadata (``custom_metadata``, and ``commit_properties``'
        custom_metadata, of the manager and then of the output)."""
        entries: dict[str, Any] = {}
        for properties in (self.commit_properties, setting(context, "commit_properties")):
            if isinstance(properties, dict) and isinstance(properties.get("custom_metadata"), dict):
                entries.update(properties["custom_metadata"])
        entries.update(self.custom_metadata or {})
        own = setting(context, "custom_metadata")
        if isinstance(own, dict):
            entries.update(own)
        return {str(k): str(v) for k, v in entries.items()}

    # --- writing ------------------------------------------------------------------------

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Deduplicate per spec, write idempotently and tracked, attach the write's metadata."""
        if obj is None:
            return
        output = obj if isinstance(obj, TableOutput) else TableOutput(obj)
        if (
            output.rows is not None
            and not is_spark_frame(output.rows)
            and not is_writable(output.rows)
        ):
            raise unsupported(type(output.rows))
        metadata = context.definition_metadata or {}
        mode = mode_of(setting(context, "mode") or self.mode)
        if mode in (WriteMode.merge, WriteMode.append, WriteMode.error, WriteMode.ignore):
            self._handle_mode(context, output, mode)
            return
        if mode is WriteMode.create_or_replace:
            if context.has_asset_partitions:
                raise ValueError(
                    "mode 'create_or_replace' replaces the whole table, and this output has "
                    "partitions; use mode 'overwrite' with partition_expr to replace them"
                )
            metadata = {**metadata, "idem/strategy": "replace", "idem/allow_empty": True}
        spec = WriteSpec.for_output(metadata, context.has_asset_partitions)
        target, name = self._table(context, spec)
        started = time.perf_counter()
        checkpoint = self._checkpoint()
        with checkpoint.open() as store:
            table = target.open()
            if (
                output.rows is not None
                and not is_spark_frame(output.rows)
                and not isinstance(output.rows, pa.RecordBatchReader)
            ):
                output = TableOutput(
                    to_arrow(output.rows),
                    output.input_signature,
                    output.schema,
                    output.input_hashes,
                )
            schema = _schema_of(output, table)
            covered = record_slice(context, spec, schema)
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
                metadata = self._confirm_unchanged(log, spec, target, table, covered, output)
            else:
                metadata = self._write(
                    context, checkpoint, log, name, spec, target, table, covered, output
                )
        metadata["write_seconds"] = round(time.perf_counter() - started, 3)
        metadata["reconciled_records"] = len(reconciled)
        metadata.setdefault("dagster/table_name", name.replace("/", "."))
        context.add_output_metadata(metadata)
        context.log.info(
            f"{spec.strategy} {target.uri} {covered.display}: "
            + (
                f"committed version {metadata['delta_version']}"
                if metadata["committed"]
                else f"unchanged, no commit (version {metadata['delta_version']}, proven by "
                f"{metadata['no_op_proof']})"
            )
        )

    def _write(
        self,
        context: dg.OutputContext,
        checkpoint: CheckpointResource,
        log: LakeWriteLog,
        name: str,
        spec: WriteSpec,
        target: LakeTable,
        table: DeltaTable | None,
        covered: PartitionSlice,
        output: TableOutput,
    ) -> dict[str, Any]:
        """Prepare, claim, write (or prove a no-op) and settle; the write's metadata.

        ``table`` is the table as opened before the write, reused to sign an unchanged slice.
        """
        spark = is_spark_frame(output.rows)
        stream = isinstance(output.rows, pa.RecordBatchReader)
        window = covered.window
        if stream and not streamable(spec, window):
            # A stream that must be deduplicated, merged or written to anything but date
            # partitions is read whole and written like a table.
            output = TableOutput(
                to_arrow(output.rows), output.input_signature, output.schema, output.input_hashes
            )
            stream = False
        # The batch first: its fingerprint is then hashed on another thread while the
        # checkpoint is written, and an unchanged rerun (hash-bound) waits for it less.
        try:
            batch = None if spark or stream else prepare(spec, output.rows)
        except BaseException as error:
            log.fail(log.begin({"window": covered.display}), error)
            raise
        claim = log.begin({"window": covered.display})
        settled = log.last_settled()
        crash_point(f"lake.before_write/{name}")
        commit_metadata = {
            **self._commit_extras(context),
            "idem.asset": name,
            "idem.window": covered.display,
            "idem.run_id": context.run_id,
            **log.commit_metadata(claim),
        }
        try:
            conditions = self._conditions(spec, covered, window, batch)
            with lease_heartbeat(
                checkpoint.resolved_url, claim, self.write_lease_seconds, checkpoint.clock()
            ):
                if stream:
                    result = write_stream(
                        spec,
                        target,
                        output.rows,
                        window,
                        output.schema,
                        commit_metadata,
                        settled=settled,
                    )
                elif batch is None:
                    outcome = write_spark(
                        spec, target, output.rows, window, output.schema, commit_metadata
                    )
                    result = outcome.result
                else:
                    result = write(
                        spec,
                        target,
                        batch,
                        window,
                        commit_metadata,
                        settled=settled,
                        conditions=conditions,
                        partition_by=covered.partition_by,
                        options=self._options_of(context),
                    )
        except BaseException as error:
            log.fail(claim, error)
            raise
        crash_point(f"lake.after_commit/{name}")
        if spark:
            conditions = spark_conditions(spec, window)
        elif stream:
            conditions = slice_conditions(spec, window, None)
        # Sign the slice as of our own version: a later writer's files must not be
        # credited with our fingerprint.
        signed = (
            table
            if table is not None and table.version() == result.version
            else target.open(result.version)
        )
        files = slice_signature(signed, conditions)
        rows = result.fingerprint.rows if batch is None else batch.rows.num_rows
        metadata_duplicates = (
            outcome.duplicates_dropped
            if spark
            else batch.duplicates_dropped
            if batch is not None
            else 0
        )
        log.settle(
            claim,
            fingerprint=str(result.fingerprint),
            files=files,
            version=result.version,
            committed=result.committed,
            rows=rows,
            input_signature=output.input_signature,
            input_hashes=output.input_hashes or {},
            conditions=conditions,
            duplicates_dropped=int(metadata_duplicates),
        )
        if spark:
            counts = RowCounts(rows, metadata_duplicates, conflicting_keys=outcome.conflicting_keys)
        else:
            counts = RowCounts(
                rows,
                metadata_duplicates,
                input_rows=rows if batch is None else batch.input_rows,
                conflicting_keys=0 if batch is None else batch.conflicting_keys,
                streamed=batch is None,
            )
        metadata = output_metadata(
            spec, result, covered.display, counts, engine="spark" if spark else None
        )
        declared = "dagster/column_schema" in (context.definition_metadata or {})
        if batch is not None and not declared:
            # What dagster-deltalake shows: the columns written (when not declared).
            metadata["dagster/column_schema"] = dg.MetadataValue.table_schema(
                dg.TableSchema(
                    columns=[
                        dg.TableColumn(name=f.name, type=str(f.type)) for f in batch.rows.schema
                    ]
                )
            )
        if output.input_signature:
            metadata["input_signature"] = output.input_signature
        return metadata

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
        own = setting(context, "table_configuration") if context else None
        merged = {**(own or {}), **(self.table_config or {})}
        return {str(k): str(v) for k, v in merged.items()} or None

    def _handle_mode(self, context: dg.OutputContext, output: TableOutput, mode: WriteMode) -> None:
        """An output in one of dagster-delta's merge, append, error or ignore modes."""
        if output.rows is None or is_spark_frame(output.rows):
            raise ValueError(
                f"mode {mode.value!r} writes tables (pyarrow, polars, pandas); "
                "a Spark DataFrame is written with mode 'overwrite'"
            )
        rows = to_arrow(output.rows)
        table_name = setting(context, "idem/table")
        target, name = self._located(context, table_name)
        plan, covered = mode_write(
            context,
            mode,
            rows.schema,
            merge_config=self.merge_config,
            schema_mode=self.schema_mode,
            writer_properties=self.writer_properties,
            table_config=self._table_config(context),
        )
        started = time.perf_counter()
        checkpoint = self._checkpoint()
        with checkpoint.open() as store:
            table = target.open()
            log = LakeWriteLog(store, name, covered.label, context.run_id, self.write_lease_seconds)
            reconciled = log.reconcile(table)
            commit_metadata = {
                **self._commit_extras(context),
                "idem.asset": name,
                "idem.window": covered.display,
                "idem.run_id": context.run_id,
            }
            written = write_by_mode(
                plan,
                log,
                name,
                target,
                table,
                covered,
                rows,
                commit_metadata,
                checkpoint=checkpoint,
                lease_seconds=self.write_lease_seconds,
            )
        written["write_seconds"] = round(time.perf_counter() - started, 3)
        written["reconciled_records"] = len(reconciled)
        written.setdefault("dagster/table_name", name.replace("/", "."))
        context.add_output_metadata(written)
        context.log.info(
            f"{mode.value} {target.uri} {covered.display}: "
            + (
                f"committed version {written['delta_version']}"
                if written["committed"]
                else f"unchanged, no commit (version {written['delta_version']}, proven by "
                f"{written['no_op_proof']})"
            )
        )

    @staticmethod
    def _conditions(
        spec: WriteSpec, covered: PartitionSlice, window: Window, batch: PreparedBatch | None
    ) -> list[Condition]:
        if spec.strategy == "overwrite":
            return list(covered.conditions)
        if spec.strategy == "merge" and batch is not None:
            return slice_conditions(spec, window, batch)
        return []

    def _confirm_unchanged(
        self,
        log: LakeWriteLog,
        spec: WriteSpec,
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
            fingerprint=settled.fingerprint,
            files=settled.files,
            version=table.version(),
            committed=False,
            rows=settled.rows,
            input_signature=settled.input_signature,
            input_hashes=output.input_hashes or settled.input_hashes,
            conditions=settled.conditions,
            duplicates_dropped=settled.duplicates_dropped,
        )
        # Nothing was computed: the fingerprint reported is the settled write's, as stored.
        skipped = WriteResult.unchanged(
            spec.strategy,
            target.uri,
            table.version(),
            Fingerprint(settled.rows, ""),
            proof=Proof.INPUTS,
        )
        metadata = output_metadata(
            spec,
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
        kind = context.dagster_type.typing_type
        as_type(pa.table({}), kind)  # an unsupported annotation fails before any read
        spec = self._read_spec(upstream, context.has_asset_partitions)
        target, _ = self._table(upstream, spec)
        table = target.open()
        columns = _columns(context)
        covered = _input_slice(context, spec, table)
        if table is None and not covered.empty:
            name = (
                upstream.asset_key.to_user_string() if upstream.has_asset_key else (upstream.name)
            )
            raise FileNotFoundError(f"no Delta table at {target.uri}: materialize {name} first")
        if covered.empty:
            # The mapped upstream partitions do not exist (a self-dependent asset's first
            # partition): no rows, with the table's columns when there is a table.
            if table is None:
                return as_type(pa.table({}), kind)
            stored = table_schema(table)
            wanted = stored if columns is None else pa.schema([stored.field(c) for c in columns])
            return as_type(wanted.empty_table(), kind)
        rows = read_rows(table, ranges=covered.conditions, columns=columns)
        return as_type(rows, kind)


def _schema_of(output: TableOutput, table: DeltaTable | None) -> pa.Schema | None:
    rows = output.rows
    if isinstance(rows, pa.Table | pa.RecordBatchReader):
        return rows.schema
    if output.schema is not None:
        return output.schema
    return table_schema(table) if table is not None else None


def _columns(context: dg.InputContext) -> list[str] | None:
    metadata = context.definition_metadata or {}
    columns = getattr(metadata.get("columns"), "value", metadata.get("columns"))
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise ValueError(
            f"input metadata 'columns' must be a list of column names, got {columns!r}"
        )
    for column in columns:
        quote_identifier(column)  # plain identifiers only
    return list(columns)


def _input_slice(
    context: dg.InputContext, spec: WriteSpec, table: DeltaTable | None
) -> PartitionSlice:
    """The upstream partitions an input reads (partition mappings applied by Dagster)."""
    if not context.has_asset_partitions:
        return PartitionSlice.whole_table()
    columns = spec.partition_columns
    if columns is None:
        return PartitionSlice.whole_table()
    schema = table_schema(table) if table is not None else None
    return partition_slice(context, columns, arrow_type_of(schema))
