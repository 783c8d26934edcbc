"""A downstream asset's input: the changes of a lake table since the asset last took them.

The table declares ``change_data_feed: true``; the asset reads what its feed holds past the
consumer's offset (kept in the checkpoint store), writes it exactly once and acknowledges::

    @dg.asset(deps=["customers"])
    def customer_changes(lake: LakeResource, checkpoint: CheckpointResource):
        with consume_changes(lake, checkpoint, "customers", "customer_changes") as changes:
            written = append_changes(lake.table("customer_changes"), changes, "customer_changes")
        return dg.MaterializeResult(metadata=changes_metadata(changes, written))

A run that stops before the offset moves is handed the same versions again; the append is
committed with the Delta txn (consumer, last version), so the replay is skipped: each change
lands once, however often the asset runs or is retried.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from idem_assets.lake import LakeTable, WriteResult, append_exactly_once
from idem_assets.lake.changes import ChangeFeed, PendingChanges
from idem_assets.resources import CheckpointResource, LakeResource


@contextmanager
def consume_changes(
    lake: LakeResource, checkpoint: CheckpointResource, table: str, consumer: str
) -> Iterator[PendingChanges]:
    """The changes of lake ``table`` that ``consumer`` has not acknowledged; acknowledged
    when the block ends without an error."""
    with checkpoint.open() as store:
        feed = ChangeFeed(store, consumer, lake.table(table))
        pending = feed.pending()
        yield pending
        if not pending.empty:
            feed.acknowledge(pending.end)


def append_changes(target: LakeTable, changes: PendingChanges, consumer: str) -> WriteResult | None:
    """Append the change rows to ``target`` exactly once (txn: consumer, the last version);
    None when there were none."""
    if changes.empty:
        return None
    return append_exactly_once(target, changes.rows, app_id=consumer, version=changes.end)


def changes_metadata(changes: PendingChanges, written: WriteResult | None) -> dict[str, Any]:
    """What a consuming run took, for its materialization."""
    if changes.empty:
        return {"change_rows": 0, "versions": "none new"}
    kinds = changes.rows.column("_change_type").to_pylist()
    return {
        "versions": f"{changes.start}..{changes.end}",
        "change_rows": len(kinds),
        **{f"rows_{kind}": kinds.count(kind) for kind in sorted(set(kinds))},
        "committed": bool(written and written.committed),
    }
