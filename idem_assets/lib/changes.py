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

Runs of the asset may overlap (several processes, one consumer name): the range is leased
to one of them (``lease_seconds``, default a minute, renewed while its block runs); the
others are handed nothing (``changes.busy``) at once, or after waiting ``wait_seconds`` for
the range to come free.
A block that raises gives its range back, so the next run takes it without waiting.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.checkpoint.heartbeat import renewing
from idem_assets.faults import crash_point
from idem_assets.lake import LakeTable, WriteResult, append_exactly_once
from idem_assets.lake.changes import DEFAULT_LEASE_SECONDS, ChangeFeed, PendingChanges
from idem_assets.lake.erasure import Erased
from idem_assets.resources import CheckpointResource, LakeResource


@contextmanager
def consume_changes(
    lake: LakeResource,
    checkpoint: CheckpointResource,
    table: str,
    consumer: str,
    *,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    wait_seconds: float = 0.0,
) -> Iterator[PendingChanges]:
    """The changes of lake ``table`` that ``consumer`` has not acknowledged, leased to this
    block for ``lease_seconds`` and renewed every third of it while the block runs (a holder
    that dies keeps the range from the others that long at most); acknowledged when the block
    ends without an error, given back when it raises. Nothing (``busy``) while another
    holder's lease is live, unless it ends within ``wait_seconds``."""
    with checkpoint.open() as store:
        feed = ChangeFeed(store, consumer, lake.table(table), lease_seconds=lease_seconds)
        pending = _without_erased(feed.pending(wait_seconds), ErasureLedger(store).erased())

        @contextmanager
        def connect() -> Iterator[Callable[[], bool]]:
            with checkpoint.open() as own:
                yield feed.using(own).renew

        try:
            if pending.empty:
                yield pending
            else:
                with renewing(connect, feed.lease_seconds, "change-feed-lease"):
                    yield pending
        except BaseException:
            feed.release()  # handed out again at once, not when the lease ends
            raise
        if not pending.empty:
            # The worst place to die: the output holds the range, the offset does not.
            crash_point(f"changes.before_acknowledge/{consumer}")
            feed.acknowledge(pending.end)


def _without_erased(pending: PendingChanges, erased: Erased) -> PendingChanges:
    """The change rows but those holding an erased key (of any erased column they have):
    an erasure is never handed downstream again, the erase's own delete rows included."""
    if pending.empty or not erased.of(pending.rows.schema.names):
        return pending
    kept, removed = erased.without(pending.rows)
    return dataclasses.replace(pending, rows=kept, erased=removed)


def append_changes(target: LakeTable, changes: PendingChanges, consumer: str) -> WriteResult | None:
    """Append the change rows to ``target`` exactly once (txn: consumer, the last version);
    None when there were none."""
    if changes.empty:
        return None
    return append_exactly_once(target, changes.rows, app_id=consumer, version=changes.end)


def changes_metadata(changes: PendingChanges, written: WriteResult | None) -> dict[str, Any]:
    """What a consuming run took, for its materialization."""
    if changes.busy:
        assert changes.held_until is not None
        until = dt.datetime.fromtimestamp(changes.held_until, dt.UTC).isoformat(timespec="seconds")
        return {"change_rows": 0, "versions": f"held by {changes.holder} until {until}"}
    if changes.empty:
        return {"change_rows": 0, "versions": "none new"}
    kinds = changes.rows.column("_change_type").to_pylist()
    return {
        "versions": f"{changes.start}..{changes.end}",
        "change_rows": len(kinds),
        **{f"rows_{kind}": kinds.count(kind) for kind in sorted(set(kinds))},
        "rows_erased": changes.erased,
        "committed": bool(written and written.committed),
    }
