"""Exactly-once appends: each batch is committed with a Delta ``txn`` (app id, version)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deltalake import DeltaTable, Transaction, write_deltalake

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.frames import FrameLike, conform, to_arrow
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import LakeTable, create_table, table_schema

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


STRATEGY = "append"


def txn_version(table: DeltaTable | None, app_id: str) -> int | None:
    """The last ``txn`` version recorded for ``app_id`` (None if never committed)."""
    if table is None:
        return None
    return table.transaction_version(app_id)


def already_committed(table: DeltaTable | None, txn: Transaction | None) -> int | None:
    """The txn version recorded for ``txn.app_id`` when it covers ``txn.version``, else None."""
    if txn is None:
        return None
    done = txn_version(table, txn.app_id)
    return done if done is not None and done >= txn.version else None


def append_exactly_once(
    target: LakeTable,
    data: FrameLike,
    app_id: str,
    version: int,
    *,
    partition_column: str | Sequence[str] | None = None,
    schema: pa.Schema | None = None,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Append ``data`` as batch ``version`` of ``app_id`` unless it already committed.

    ``commit.options``: the table configuration and writer properties of a table-creating
    write, and ``evolve_schema`` (new columns are added to the table; stored rows read null).

    The check reads ``transaction_version`` from a fresh snapshot on every
    attempt. Versions must grow by one per batch of one app id; use an app id per
    stream or per (asset, partition), never one per table with versions derived
    from partitions, or an out-of-order backfill would be skipped.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"txn version must be a non-negative int, got {version!r}")
    if not app_id:
        raise ValueError("app_id must not be empty")
    rows = to_arrow(data)
    if schema is not None:
        rows = conform(rows, schema)
    batch_fp = commit.fingerprint_of(rows)
    txn = Transaction(app_id=app_id, version=version)
    properties = commit.properties({"idem.fingerprint": str(batch_fp)}, txn)
    options = commit.options

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        done = already_committed(table, txn)
        if done is not None:
            return attempt.unchanged(batch_fp, proof=Proof.TXN, details={"txn_version": done})
        if table is None:
            columns = [partition_column] if isinstance(partition_column, str) else partition_column
            new_version = create_table(target, rows, properties, options, list(columns or ()))
        else:
            # An empty batch still commits, so the txn version advances past it.
            write_deltalake(
                table,
                rows if options.evolve_schema else conform(rows, table_schema(table)),
                mode="append",
                schema_mode="merge" if options.evolve_schema else None,
                writer_properties=options.writer(),
                commit_properties=properties,
            )
            new_version = table.version()
        return attempt.inserted(
            new_version, rows.num_rows, batch_fp, details={"txn_version": version}
        )

    return commit_retried(target, STRATEGY, once)
