"""Writes in dagster-delta's modes (merge, append, error, ignore), each rerun a no-op.

- merge: ``lake.clauses``: only rows a clause changes are sent, nothing to change means no
  commit; the checkpoint proves an unchanged rerun without reading the table.
- append: exactly once per output. A partitioned output appends once per partition, with a
  Delta ``txn`` whose app id names the asset and the partition: a rerun with the same rows
  appends nothing, a rerun with other rows is refused (``AppendConflictError``: an append
  cannot take back the rows it added; overwrite or merge can). An unpartitioned output
  appends once per content: the same rows again append nothing, other rows append.
- error: create the table; a rerun that holds what the table holds is a no-op, anything
  else is refused as delta-rs's ``mode="error"`` is.
- ignore: create the table if there is none, else leave it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg
from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.checkpoint.heartbeat import lease_heartbeat
from idem_assets.faults import crash_point
from idem_assets.io_manager.noop import unchanged_since
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.tracking import LakeWriteLog
from idem_assets.lake import Fingerprint, LakeTable, Proof, WriteResult, fingerprint, read_rows
from idem_assets.lake.append import append_exactly_once, create_with
from idem_assets.lake.clauses import ClauseMerge, MergeConfigError, merge_by_clauses
from idem_assets.lake.delta_log import commit_infos
from idem_assets.lake.predicates import Condition
from idem_assets.lake.tables import (
    WriteOptions,
    commit_properties,
    slice_signature,
    with_commit_retries,
)
from idem_assets.resources import CheckpointResource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


APPEND_ID_KEY = "idem.append_id"


class AppendConflictError(RuntimeError):
    """An output appended before, now with other rows: appending again would duplicate."""


@dataclass(frozen=True)
class ModeWrite:
    """One output's write in a dagster-delta mode, as the manager resolved it."""

    mode: str
    merge: ClauseMerge | None = None
    schema_mode: str | None = None
    # The output's partitions (a merge's scope, the files an append's proof signs).
    scope: tuple[Condition, ...] = ()
    partition_by: tuple[str, ...] = ()
    partitioned: bool = False
    writer_properties: Mapping[str, Any] | None = None
    table_config: Mapping[str, str] | None = None
    commit_extras: Mapping[str, Any] = field(default_factory=dict)

    def options(self) -> WriteOptions:
        """How files are written and a table is created (and whether columns are added)."""
        return WriteOptions(
            table_config=self.table_config,
            writer_properties=self.writer_properties,
            evolve_schema=self.schema_mode == "merge",
        )

    def proof_key(self, content: Fingerprint) -> str:
        """What a settled write must match to vouch for this one: rows and configuration."""
        described = f"{self.mode}\n{self.merge.describe() if self.merge else ''}"
        return f"{content}|{hashlib.sha256(described.encode()).hexdigest()[:16]}"


def write_by_mode(
    plan: ModeWrite,
    log: LakeWriteLog,
    name: str,
    target: LakeTable,
    table: DeltaTable | None,
    covered: PartitionSlice,
    rows: pa.Table,
    commit_metadata: Mapping[str, Any],
    *,
    checkpoint: CheckpointResource,
    lease_seconds: float,
) -> dict[str, Any]:
    """Claim, write (or prove a no-op) and settle one output; the write's metadata."""
    content = fingerprint(rows)
    key = plan.proof_key(content)
    settled = log.last_settled()
    conditions = list(plan.scope)
    if (
        settled is not None
        and table is not None
        and settled.fingerprint == key
        and unchanged_since(settled, table, conditions)
    ):
        result = WriteResult.unchanged(
            plan.mode, target.uri, table.version(), content, proof=Proof.CHECKPOINT
        )
        claim = log.begin({"window": covered.display, "mode": plan.mode})
        wrote = False
    else:
        wrote = True
        claim = log.begin({"window": covered.display, "mode": plan.mode})
        crash_point(f"lake.before_write/{name}")
        metadata = {**commit_metadata, **log.commit_metadata(claim)}
        try:
            with lease_heartbeat(checkpoint.resolved_url, claim, lease_seconds, checkpoint.clock()):
                result = _write(plan, name, target, covered, rows, content, metadata)
        except BaseException as error:
            log.fail(claim, error)
            raise
    with log.settling(claim, result.version, result.committed):
        if wrote:
            crash_point(f"lake.after_commit/{name}")
        stored = target.open(result.version) if result.version >= 0 else None
        log.settle(
            claim,
            fingerprint=key,
            files=slice_signature(stored, conditions),
            version=result.version,
            committed=result.committed,
            rows=rows.num_rows,
            input_signature=None,
            conditions=conditions,
            duplicates_dropped=0,
        )
    return _metadata(plan, result, covered, rows, stored)


def _write(
    plan: ModeWrite,
    name: str,
    target: LakeTable,
    covered: PartitionSlice,
    rows: pa.Table,
    content: Fingerprint,
    metadata: Mapping[str, Any],
) -> WriteResult:
    writer = _MODE_WRITERS.get(plan.mode)
    if writer is None:
        raise MergeConfigError(f"mode {plan.mode!r} is not written here")
    return writer(plan, name, target, covered, rows, content, metadata)


def _merge(
    plan: ModeWrite,
    name: str,
    target: LakeTable,
    covered: PartitionSlice,
    rows: pa.Table,
    content: Fingerprint,
    metadata: Mapping[str, Any],
) -> WriteResult:
    assert plan.merge is not None
    return merge_by_clauses(
        target,
        rows,
        plan.merge,
        scope=plan.scope,
        partition_by=plan.partition_by,
        commit_metadata=metadata,
        writer_properties=plan.options().writer(),
        table_config=plan.table_config,
        known_fingerprint=content,
    )


def append_id(name: str, covered: PartitionSlice, content: Fingerprint, partitioned: bool) -> str:
    """The txn app id of an append: per partition, or per content when unpartitioned."""
    identity = covered.label if partitioned else content.digest
    return f"idem/{name}/{identity}"


def _append(
    plan: ModeWrite,
    name: str,
    target: LakeTable,
    covered: PartitionSlice,
    rows: pa.Table,
    content: Fingerprint,
    metadata: Mapping[str, Any],
) -> WriteResult:
    app_id = append_id(name, covered, content, plan.partitioned)
    table = target.open()
    if table is not None and table.transaction_version(app_id) is not None:
        earlier = appended_fingerprint(table, app_id)
        if earlier is not None and earlier != str(content):
            raise AppendConflictError(
                f"{target.uri} {covered.display} was appended before with other rows "
                f"({earlier}; now {content}). An append cannot take back rows it added, "
                "so appending again would keep both. To replace the partition, write it "
                "with mode='overwrite' and partition_expr; to update rows by key, use "
                "mode='merge'"
            )
    result = append_exactly_once(
        target,
        rows,
        app_id,
        0,
        partition_column=plan.partition_by,
        commit_metadata={**metadata, APPEND_ID_KEY: app_id},
        options=plan.options(),
        known_fingerprint=content,
    )
    return dataclasses.replace(result, details={**result.details, "txn_app_id": app_id})


def appended_fingerprint(table: DeltaTable, app_id: str) -> str | None:
    """The content fingerprint the commit of ``app_id``'s append recorded (None: unknown)."""
    for _, info in commit_infos(table, table.version() + 1):
        if info.get(APPEND_ID_KEY) == app_id:
            return info.get("idem.fingerprint")
    return None


def _create_once(
    plan: ModeWrite,
    name: str,
    target: LakeTable,
    covered: PartitionSlice,
    rows: pa.Table,
    content: Fingerprint,
    metadata: Mapping[str, Any],
) -> WriteResult:
    properties = commit_properties({**metadata, "idem.fingerprint": str(content)})

    def attempt(number: int) -> WriteResult:
        table = target.open()
        if table is not None:
            if plan.mode == "ignore":
                return WriteResult.unchanged(
                    "ignore", target.uri, table.version(), content, proof=Proof.TABLE_EXISTS
                )
            if fingerprint(read_rows(table)) == content:
                return WriteResult.unchanged(
                    "error",
                    target.uri,
                    table.version(),
                    content,
                    proof=Proof.CONTENT,
                    attempts=number + 1,
                )
            raise FileExistsError(
                f"mode='error': a Delta table already exists at {target.uri} and holds other "
                "rows than this output; nothing was written"
            )
        create_with(target, rows, plan.partition_by, properties, plan.options())
        return WriteResult.written(
            plan.mode,
            target.uri,
            0,
            rows.num_rows,
            content,
            rows_inserted=rows.num_rows,
            attempts=number + 1,
        )

    return with_commit_retries(attempt)


# Each mode's write, chosen here and nowhere else.
_MODE_WRITERS: Mapping[str, Callable[..., WriteResult]] = {
    "merge": _merge,
    "append": _append,
    "error": _create_once,
    "ignore": _create_once,
}


def _metadata(
    plan: ModeWrite,
    result: WriteResult,
    covered: PartitionSlice,
    rows: pa.Table,
    stored: DeltaTable | None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "mode": plan.mode,
        "table_uri": dg.MetadataValue.path(result.table_uri),
        "partition_range": covered.display,
        "delta_version": result.version,
        "table_version": result.version,
        "committed": result.committed,
        "fingerprint": str(result.fingerprint),
        "dagster/row_count": rows.num_rows,
        "rows_written": result.rows_written,
        "rows_inserted": result.rows_inserted,
        "rows_updated": result.rows_updated,
        "rows_deleted": result.rows_deleted,
        "no_op_proof": result.proof.value,
    }
    stats = result.details.get("merge_stats")
    if stats is not None:
        metadata["merge_stats"] = dg.MetadataValue.json(dict(stats))
        metadata["num_output_rows"] = int(stats.get("num_output_rows", 0))
    if "txn_app_id" in result.details:
        metadata["txn_app_id"] = result.details["txn_app_id"]
    if stored is not None:
        metadata["dagster/column_schema"] = dg.MetadataValue.table_schema(
            dg.TableSchema(
                columns=[
                    dg.TableColumn(name=f.name, type=str(f.type))
                    for f in pa.schema(stored.schema().to_arrow())
                ]
            )
        )
    return metadata


def scope_columns(conditions: Sequence[Condition]) -> tuple[str, ...]:
    """The columns a partition scope filters on (the table's partition columns)."""
    return tuple(dict.fromkeys(c.column for c in conditions))
