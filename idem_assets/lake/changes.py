"""A table's Change Data Feed, and "the changes since I last ran" for a consumer, exactly once.

``change_rows`` reads the feed of a range of versions. ``ChangeFeed`` keeps a consumer's
offset (the last version it acknowledged) as a memo of the checkpoint store: the consumer
reads the versions after it (``pending``), writes its output, then ``acknowledge``s the
range's end. A consumer that stops before acknowledging is handed the same range again
(the same end, even when newer versions came since), so its output must be idempotent:
e.g. ``append_exactly_once`` with the consumer as app id and the range's end as txn version
makes the replay commit nothing.

What each of our writes puts in the feed: ``lake.change_data``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

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

    def remember(self, scope: str, memos: Iterable[Any]) -> int:
        """Keep each memo (``key``, ``stamp``, ``value``), replacing the key's earlier one."""
        ...


@dataclass(frozen=True)
class _Offset:
    """A consumer's offset in the shape of a checkpoint memo: the last version it
    acknowledged, and the end of the range it was handed and has not acknowledged."""

    key: str  # the consumer
    stamp: str  # the table it reads
    value: dict[str, int | None]


class PendingChanges(NamedTuple):
    """The versions ``start..end`` (inclusive) a consumer has not acknowledged, and their
    change rows. ``end < start`` when there are none."""

    start: int
    end: int
    rows: pa.Table

    @property
    def empty(self) -> bool:
        """Whether there is no new version (``rows`` may be empty with new versions too)."""
        return self.end < self.start


class ChangeFeed:
    """The changes of ``source`` a consumer has not acknowledged yet (see the module
    docstring); its offset is the memo ``consumer`` in ``scope`` of ``store``.

    A range once handed out is handed out again, unchanged, until it is acknowledged, even
    when newer versions have come since: a replay is the same batch (same rows, same end),
    which an idempotent output recognises. One process per consumer name at a time.
    """

    def __init__(
        self,
        store: OffsetStore,
        consumer: str,
        source: LakeTable,
        *,
        preimages: bool = False,
        scope: str = OFFSETS_SCOPE,
    ) -> None:
        if not consumer:
            raise ValueError("a change feed consumer needs a name")
        self.store = store
        self.consumer = consumer
        self.source = source
        self.preimages = preimages
        self.scope = scope

    def _offset(self) -> tuple[int, int | None]:
        """(last version acknowledged or -1, end of the range handed out since or None)."""
        memo = self.store.memos(self.scope, [self.consumer]).get(self.consumer)
        if memo is None:
            return -1, None
        if memo.stamp != self.source.uri:
            raise ValueError(
                f"consumer {self.consumer!r} keeps an offset of {memo.stamp}, not of "
                f"{self.source.uri}: give each source its own consumer name"
            )
        done, handed = int(memo.value["acknowledged"]), memo.value.get("handed_out")
        return done, None if handed is None or int(handed) <= done else int(handed)

    def _remember(self, done: int, handed: int | None) -> None:
        value = {"acknowledged": done, "handed_out": handed}
        self.store.remember(self.scope, [_Offset(self.consumer, self.source.uri, value)])

    def acknowledged(self) -> int:
        """The last version the consumer acknowledged (-1 before its first)."""
        return self._offset()[0]

    def pending(self) -> PendingChanges:
        """The versions after the acknowledged one, and their change rows: the range handed
        out before if it was not acknowledged, else up to the newest version. None, with no
        error, when the table does not exist yet or has no new version."""
        done, handed = self._offset()
        table = self.source.open()
        if table is None:
            return PendingChanges(done + 1, done, pa.schema(change_fields()).empty_table())
        _require_feed(table)
        end = table.version() if handed is None else handed
        if end <= done:
            schema = pa.schema([*table_schema(table), *change_fields()])
            return PendingChanges(done + 1, done, schema.empty_table())
        if handed is None:
            self._remember(done, end)  # before the rows reach the consumer
        rows = change_rows(self.source, done + 1, end, preimages=self.preimages)
        return PendingChanges(done + 1, end, rows)

    def acknowledge(self, end: int) -> None:
        """Record that the consumer's output holds the changes up to version ``end``
        (an ``end`` at or before the acknowledged one changes nothing)."""
        done, handed = self._offset()
        if end <= done:
            return
        table = self.source.open()
        newest = -1 if table is None else table.version()
        if end > newest:
            raise ValueError(
                f"cannot acknowledge version {end} of {self.source.uri}: its newest is {newest}"
            )
        self._remember(end, handed if handed is not None and handed > end else None)
