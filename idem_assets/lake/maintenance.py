"""Maintenance of a daily-written Delta table: compaction, vacuum and log checkpoints.

Each operation changes files, never content. ``compact`` rewrites small files into
larger ones (Z-ordered where columns are given) in one commit that delta-rs checks against
concurrent writers like any other; with its internal retries off, a compaction that lost
a race is planned again on the new snapshot, so it can never resurrect rows a concurrent
overwrite removed. The table's fingerprint is taken before and after and must be equal.

``vacuum`` deletes files the log stopped referencing (and, with ``full``, files it never
referenced: the staged files of crashed writes) once they are older than the retention.
The retention is never below ``MIN_RETENTION_HOURS``: a reader or a time-travel read of a
version up to seven days old still finds its files, and a write that is staging files
right now (they are young) loses none of them. delta-rs also refuses a retention shorter
than the table's ``delta.deletedFileRetentionDuration``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import Attempt, commit_retried
from idem_assets.lake.delta_log import commit_infos
from idem_assets.lake.fingerprint import Fingerprint, fingerprint
from idem_assets.lake.stored import table_fingerprint
from idem_assets.lake.tables import LakeTable, commit_properties, read_rows

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


# Delta's default deletedFileRetentionDuration, and the time-travel window the docs promise.
MIN_RETENTION_HOURS = 168
# Compaction's output files (delta-rs's default is 100 MiB too).
TARGET_FILE_BYTES = 100 * 1024 * 1024


class MaintenanceError(RuntimeError):
    """A maintenance operation refused or found the table changed by it."""


@dataclass(frozen=True)
class Compaction:
    """What one compaction did to a table."""

    table_uri: str
    version_before: int
    version: int
    committed: bool
    files_removed: int
    files_added: int
    z_order: tuple[str, ...]


@dataclass(frozen=True)
class Vacuum:
    """What one vacuum deleted (or would delete, on a dry run)."""

    table_uri: str
    retention_hours: int
    files: tuple[str, ...]
    dry_run: bool


def compact(
    target: LakeTable,
    *,
    z_order: Sequence[str] = (),
    target_size: int = TARGET_FILE_BYTES,
    commit_metadata: dict[str, str] | None = None,
) -> Compaction:
    """Rewrite the table's small files into fewer, larger ones; content stays the same.

    Nothing is committed when there is nothing to merge. Raises ``MaintenanceError`` if
    the table is missing or its fingerprint changed across the compaction.
    """
    table = target.open()
    if table is None:
        raise MaintenanceError(f"{target.uri}: no Delta table to compact")
    properties = commit_properties({"idem.maintenance": "compact", **(commit_metadata or {})})
    columns = tuple(z_order)

    def once(attempt: Attempt) -> Compaction:
        table = attempt.table
        assert table is not None
        before = table.version()
        optimizer = table.optimize
        if columns and not _has_split_partition(table):
            # Every partition is one file, already ordered by the last Z-order: rewriting
            # them again would commit the same content in new files every night.
            metrics: dict[str, Any] = {}
        elif columns:
            metrics = optimizer.z_order(
                columns, target_size=target_size, commit_properties=properties
            )
        else:
            metrics = optimizer.compact(target_size=target_size, commit_properties=properties)
        latest = target.open()
        assert latest is not None
        version = _compaction_version(latest, before)
        if version is not None:
            # Writers may have committed around it: compare the compaction's own version with
            # the one it was committed on top of.
            previous, compacted = target.open(version - 1), target.open(version)
            assert previous is not None and compacted is not None
            was, now = _content(target, previous), _content(target, compacted)
            if was != now:
                raise MaintenanceError(
                    f"{target.uri}: compaction to version {version} changed the content "
                    f"({was} -> {now}); restore version {version - 1}"
                )
        return Compaction(
            table_uri=target.uri,
            version_before=before,
            version=before if version is None else version,
            committed=version is not None,
            files_removed=int(metrics.get("numFilesRemoved", 0)),
            files_added=int(metrics.get("numFilesAdded", 0)),
            z_order=columns,
        )

    return commit_retried(target, "compact", once)


def _compaction_version(table: DeltaTable, after: int) -> int | None:
    """The version of the compaction committed after version ``after``, if there is one."""
    for version, info in commit_infos(table, table.version() - after):
        if info.get("idem.maintenance") == "compact":
            return version
    return None


def _content(target: LakeTable, table: DeltaTable) -> Fingerprint | None:
    """The table's fingerprint; file by file when it has at most one partition column."""
    if len(table.metadata().partition_columns) <= 1:
        return table_fingerprint(target, table)
    return fingerprint(read_rows(table))


def _has_split_partition(table: DeltaTable) -> bool:
    """Whether some partition (or the unpartitioned table) holds more than one file."""
    actions = pa.table(table.get_add_actions(flatten=True))
    partitions = [f"partition.{c}" for c in table.metadata().partition_columns]
    if not partitions:
        return actions.num_rows > 1
    counts = actions.group_by(partitions).aggregate([("path", "count")])
    return bool(counts.num_rows) and max(counts.column("path_count").to_pylist()) > 1


def vacuum(
    target: LakeTable,
    retention_hours: int = MIN_RETENTION_HOURS,
    *,
    full: bool = True,
    dry_run: bool = False,
) -> Vacuum:
    """Delete data files no version inside the retention needs; refuses a short retention."""
    if retention_hours < MIN_RETENTION_HOURS:
        raise MaintenanceError(
            f"vacuum retention {retention_hours} h is below {MIN_RETENTION_HOURS} h: readers "
            "and time-travel reads of the last seven days would lose their files"
        )
    table = target.open()
    if table is None:
        raise MaintenanceError(f"{target.uri}: no Delta table to vacuum")
    files = table.vacuum(
        retention_hours=retention_hours,
        dry_run=dry_run,
        enforce_retention_duration=True,
        full=full,
        commit_properties=commit_properties({"idem.maintenance": "vacuum"}),
    )
    return Vacuum(target.uri, retention_hours, tuple(sorted(files)), dry_run)


def checkpoint(target: LakeTable) -> int:
    """Write a checkpoint of the table's log at its current version; that version."""
    table = target.open()
    if table is None:
        raise MaintenanceError(f"{target.uri}: no Delta table to checkpoint")
    table.create_checkpoint()
    return table.version()
