"""A table's Change Data Feed, and "the changes since I last ran" for a consumer, exactly once.

``change_rows`` reads the feed of a range of versions. ``ChangeFeed`` keeps a consumer's
offset (the last version it acknowledged) as a memo of the checkpoint store: the consumer
reads the versions after it (``pending``), writes its output, then ``acknowledge``s the
range's end. A consumer that stops before acknowledging is handed the same range again
(the same end, even when newer versions came since), so its output must be idempotent:
e.g. ``append_exactly_once`` with the consumer as app id and the range's end as txn version
makes the replay commit nothing.

Any number of processes may share a consumer name: a range is handed out under a lease
(its holder's token and an expiry on the store's clock), taken, renewed (``renew``) and given
back by compare-and-set on the memo (``remember_if``). While one holder's lease is live the others
are handed nothing (a ``busy`` ``PendingChanges`` naming the holder); once it expires
unacknowledged (the holder died) the next one is handed the same range, a replay.

What each of our writes puts in the feed: ``lake.change_data``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from idem_assets._lazy import lazy_module
from idem_assets.lake.change_data import CHANGE_DATA_FEED, feeds_changes
from idem_assets.lake.tables import LakeTable, table_schema
from idem_assets.transient import retrying

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = (
    "_change_type",
    "_commit_version",
    "_commit_timestamp",
)
PREIMAGE = "update_preimage"
# Within a commit, what a row was comes before what it is: a consumer applying the rows in
# order never deletes a row the same commit wrote back.
_ORDER = {PREIMAGE: 0, "delete": 1, "insert": 2, "update_postimage": 3}
OFFSETS_SCOPE = "change-offsets"
# A consumer's block reads one range and writes it once: seconds, so a minute is ample (and
# ``consume_changes`` renews it while the block runs). A holder that dies keeps its range
# from the others this long at most; one whose renewals stall shares the range with the next
# holder (both write it under the same txn: one commits).
DEFAULT_LEASE_SECONDS = 60.0
# How often a consumer waiting out a busy range looks again: the holder may acknowledge or
# give the range back before its lease ends.
_POLL_SECONDS = 0.2


class ChangeFeedDisabledError(ValueError):
    """A table (or range of versions) without a change feed; the message says what to set."""


def change_fields() -> list[pa.Field]:
    """The columns the feed adds to a table's own."""
    return [
        pa.field(CHANGE_TYPE, pa.string()),
        pa.field(COMMIT_VERSION, pa.int64()),
        pa.field(COMMIT_TIMESTAMP, pa.timestamp("ms", tz="UTC")),
    ]


def change_rows(
    target: LakeTable,
    start_version: int,
    end_version: int | None = None,
    *,
    preimages: bool = False,
) -> pa.Table:
    """The feed's rows of versions ``start_version`` to ``end_version`` (inclusive; the
    newest without), in commit order: the table's columns, ``_change_type`` (insert,
    update_preimage, update_postimage, delete), ``_commit_version`` and
    ``_commit_timestamp``. Pre-images are left out unless ``preimages``. Versions past the
    newest hold no rows; commits that change no rows (optimize, vacuum) add none.
    """
    if not isinstance(start_version, int) or isinstance(start_version, bool) or start_version < 0:
        raise ValueError(f"start_version must be a non-negative int, got {start_version!r}")
    if end_version is not None and end_version < start_version:
        raise ValueError(f"end_version {end_version} is before start_version {start_version}")
    table = target.open()
    if table is None:
        raise ValueError(f"{target.uri} is not a Delta table (yet): it has no changes to read")
    _require_feed(table)
    end = table.version() if end_version is None else min(end_version, table.version())
    schema = pa.schema([*table_schema(table), *change_fields()])
    if end < start_version:
        return schema.empty_table()

    def read() -> pa.Table:
        try:
            return pa.table(table.load_cdf(starting_version=start_version, ending_version=end))
        except DeltaError as error:
            if "does not have change data enabled" in str(error):
                raise ChangeFeedDisabledError(
                    f"{table.table_uri} kept no change feed in some of versions "
                    f"{start_version}..{end} ({error}); read from a version written after "
                    f"{CHANGE_DATA_FEED} was set to true"
                ) from error
            raise

    rows = retrying(read, table.table_uri, target.retries())
    rows = pa.Table.from_arrays([rows.column(f.name).cast(f.type) for f in schema], schema=schema)
    if not preimages:
        rows = rows.filter(pc.not_equal(rows.column(CHANGE_TYPE), PREIMAGE))
    rank = pa.array([_ORDER.get(t, 4) for t in rows.column(CHANGE_TYPE).to_pylist()], pa.int8())
    order = pc.sort_indices(
        pa.table({"version": rows.column(COMMIT_VERSION), "rank": rank}),
        sort_keys=[("version", "ascending"), ("rank", "ascending")],
    )
    return rows.take(order)


def _require_feed(table: DeltaTable) -> None:
    if not feeds_changes(table):
        raise ChangeFeedDisabledError(
            f"{table.table_uri} does not keep a change data feed: set the table property "
            f"{CHANGE_DATA_FEED}=true (WriteOptions.table_config when a write creates the "
            "table); changes are readable from the first version written after that"
        )


class OffsetStore(Protocol):
    """Where offsets are kept: ``checkpoint.CheckpointStore``'s memos (the lake layer does
    not import the checkpoint layer, so the store is taken by what it does)."""

    def memos(self, scope: str, keys: Iterable[str]) -> Mapping[str, Any]:
        """The memos (``stamp``, ``value``) of ``keys`` in ``scope`` that exist."""
        ...

    def remember_if(self, scope: str, memo: Any, expected: Any | None) -> bool:
        """Compare-and-set: keep ``memo`` if the key holds no memo (``expected`` None) or
        still exactly ``expected``; True if it was kept."""
        ...

    def now(self) -> float:
        """Epoch seconds on the store's clock, the one leases are judged by."""
        ...


@dataclass(frozen=True)
class _Offset:
    """A consumer's offset in the shape of a checkpoint memo (see ``_Handout``)."""

    key: str  # the consumer
    stamp: str  # the table it reads
    value: dict[str, Any]


@dataclass(frozen=True)
class _Handout:
    """What an offset memo holds: the last version acknowledged (-1 before the first), the
    end of the range handed out since (None when there is none), and who holds that range:
    its name, its token (one per ``ChangeFeed``) and its lease's end on the store's clock.
    A range without a token (given back, or handed out before leases existed) is free."""

    acknowledged: int = -1
    handed_out: int | None = None
    holder: str | None = None
    token: str | None = None
    lease_expires_at: float | None = None

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> _Handout:
        """Read a memo's value (older memos hold only the two versions)."""
        done, handed = int(value["acknowledged"]), value.get("handed_out")
        if handed is None or int(handed) <= done:
            return cls(done)
        expires = value.get("lease_expires_at")
        return cls(
            done,
            int(handed),
            value.get("holder"),
            value.get("token"),
            None if expires is None else float(expires),
        )

    def held_by_another(self, token: str, now: float) -> bool:
        """Whether a holder other than ``token`` has a live lease on the handed-out range."""
        return (
            self.handed_out is not None
            and self.token not in (None, token)
            and self.lease_expires_at is not None
            and self.lease_expires_at > now
        )


@dataclass(frozen=True, eq=False)
class PendingChanges:
    """The versions ``start..end`` (inclusive) a consumer has not acknowledged, and their
    change rows; ``end < start`` when it has nothing to do. ``holder`` and ``held_until``
    (store clock, epoch seconds) say whose lease covers the range: this consumer's when it
    was handed out, another holder's when the range is ``busy``. Unpacks as
    ``start, end, rows``."""

    start: int
    end: int
    rows: pa.Table
    holder: str | None = None
    held_until: float | None = None
    erased: int = 0  # change rows left out because they hold an erased key

    def __iter__(self) -> Iterator[Any]:
        return iter((self.start, self.end, self.rows))

    @property
    def empty(self) -> bool:
        """Whether there is nothing to do: no new version, or the range is ``busy`` (``rows``
        may be empty with new versions too)."""
        return self.end < self.start

    @property
    def busy(self) -> bool:
        """Whether another holder's live lease kept the range from this consumer."""
        return self.empty and self.holder is not None


class ChangeFeed:
    """The changes of ``source`` a consumer has not acknowledged yet (see the module
    docstring); its offset is the memo ``consumer`` in ``scope`` of ``store``.

    A range once handed out is handed out again, unchanged, until it is acknowledged, even
    when newer versions have come since: a replay is the same batch (same rows, same end),
    which an idempotent output recognises. Any number of processes may use one consumer
    name: each range is handed out under a lease of ``lease_seconds`` (default
    ``DEFAULT_LEASE_SECONDS``) to one ``ChangeFeed`` at a time; ``holder`` names it in what
    the others are told (default ``host:pid``).
    """

    def __init__(
        self,
        store: OffsetStore,
        consumer: str,
        source: LakeTable,
        *,
        preimages: bool = False,
        scope: str = OFFSETS_SCOPE,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        holder: str | None = None,
    ) -> None:
        if not consumer:
            raise ValueError("a change feed consumer needs a name")
        self.store = store
        self.consumer = consumer
        self.source = source
        self.preimages = preimages
        self.scope = scope
        self.lease_seconds = _seconds("lease_seconds", lease_seconds, positive=True)
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.token = uuid.uuid4().hex

    def _read(self) -> tuple[Any, _Handout]:
        """The offset memo as stored (None before the first) and what it holds."""
        memo = self.store.memos(self.scope, [self.consumer]).get(self.consumer)
        if memo is None:
            return None, _Handout()
        if memo.stamp != self.source.uri:
            raise ValueError(
                f"consumer {self.consumer!r} keeps an offset of {memo.stamp}, not of "
                f"{self.source.uri}: give each source its own consumer name"
            )
        return memo, _Handout.of(memo.value)

    def _swap(self, expected: Any, new: _Handout) -> bool:
        """Replace the offset read as ``expected`` by ``new``; False if it changed since."""
        memo = _Offset(self.consumer, self.source.uri, dataclasses.asdict(new))
        return self.store.remember_if(self.scope, memo, expected)

    def acknowledged(self) -> int:
        """The last version the consumer acknowledged (-1 before its first)."""
        return self._read()[1].acknowledged

    def pending(self, wait_seconds: float = 0.0) -> PendingChanges:
        """The versions after the acknowledged one, and their change rows: the range handed
        out before if it was not acknowledged, else up to the newest version, leased to this
        feed. None, with no error, when the table does not exist yet or has no new version.

        While another holder's lease on the range is live: nothing (``busy``), at once or,
        with ``wait_seconds``, after waiting up to that long for the range to come free.
        """
        deadline = time.monotonic() + _seconds("wait_seconds", wait_seconds, positive=False)
        while True:
            pending = self._take()
            left = deadline - time.monotonic()
            if not pending.busy or left <= 0:
                return pending
            assert pending.held_until is not None
            time.sleep(max(0.0, min(_POLL_SECONDS, left, pending.held_until - self.store.now())))

    def _take(self) -> PendingChanges:
        """One look: the range leased to this feed, or nothing (free or busy)."""
        while True:
            memo, offset = self._read()
            nothing = offset.acknowledged + 1, offset.acknowledged
            table = self.source.open()
            if table is None:
                return PendingChanges(*nothing, pa.schema(change_fields()).empty_table())
            _require_feed(table)
            no_rows = pa.schema([*table_schema(table), *change_fields()]).empty_table()
            now = self.store.now()
            if offset.held_by_another(self.token, now):
                return PendingChanges(*nothing, no_rows, offset.holder, offset.lease_expires_at)
            end = table.version() if offset.handed_out is None else offset.handed_out
            if end <= offset.acknowledged:
                return PendingChanges(*nothing, no_rows)
            taken = _Handout(
                offset.acknowledged, end, self.holder, self.token, now + self.lease_seconds
            )
            if self._swap(memo, taken):  # before the rows reach the consumer
                break
            # another process changed the offset since we read it: look again
        start = taken.acknowledged + 1
        try:
            rows = change_rows(self.source, start, end, preimages=self.preimages)
        except BaseException:
            self.release()  # nothing reached the consumer: the next holder need not wait
            raise
        return PendingChanges(start, end, rows, self.holder, taken.lease_expires_at)

    def acknowledge(self, end: int) -> None:
        """Record that the consumer's output holds the changes up to version ``end``
        (an ``end`` at or before the acknowledged one changes nothing: the offset never
        moves back). Acknowledging the whole handed-out range ends its lease."""
        newest: int | None = None
        while True:
            memo, offset = self._read()
            if end <= offset.acknowledged:
                return
            if newest is None:
                table = self.source.open()
                newest = -1 if table is None else table.version()
            if end > newest:
                raise ValueError(
                    f"cannot acknowledge version {end} of {self.source.uri}: its newest is {newest}"
                )
            rest = offset.handed_out is not None and offset.handed_out > end
            moved = dataclasses.replace(offset, acknowledged=end) if rest else _Handout(end)
            if self._swap(memo, moved):
                return

    def renew(self) -> bool:
        """Extend this feed's lease on the range it holds to ``lease_seconds`` from now, so a
        block that runs long keeps it; False when it holds none (acknowledged, given back, or
        handed to another holder after the lease lapsed)."""
        while True:
            memo, offset = self._read()
            if offset.handed_out is None or offset.token != self.token:
                return False
            longer = dataclasses.replace(
                offset, lease_expires_at=self.store.now() + self.lease_seconds
            )
            if self._swap(memo, longer):
                return True

    def using(self, store: OffsetStore) -> ChangeFeed:
        """This feed (its holder and token) over another connection to the same store: a
        thread renewing its lease needs its own."""
        twin = copy.copy(self)
        twin.store = store
        return twin

    def release(self) -> bool:
        """Give back the range this feed holds without acknowledging it (its block failed):
        the next ``pending`` of any holder is handed the same range at once, not when the
        lease ends. True if this feed held a range."""
        while True:
            memo, offset = self._read()
            if offset.handed_out is None or offset.token != self.token:
                return False
            freed = dataclasses.replace(offset, holder=None, token=None, lease_expires_at=None)
            if self._swap(memo, freed):
                return True


def _seconds(name: str, value: float, *, positive: bool) -> float:
    """A finite number of seconds, > 0 (``positive``) or >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)
