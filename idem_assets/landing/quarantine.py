"""The shared quarantine table: every rejected landing row, with its source and reason.

Daily and snapshot sources replace their slice of it (source, days) in one commit; a
stream appends each batch's rows exactly once with its own txn app id. Both lay the table
out the same way and mark their commits as the quarantine asset's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from deltalake.exceptions import DeltaError

from idem_assets._lazy import lazy_module
from idem_assets.lake import (
    Commit,
    LakeTable,
    OneOf,
    WriteResult,
    append_exactly_once,
    overwrite_slice,
)
from idem_assets.lake.predicates import Condition, date_range
from idem_assets.lake.tables import commit_properties, create_table, is_conflict
from idem_assets.landing.contract import SourceContract
from idem_assets.landing.normalise import quarantine_schema

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


QUARANTINE_TABLE = "quarantine"
QUARANTINE_PARTITIONS = ("source", "partition_date")


class Days(Protocol):
    """The ``[start, end)`` days a write covers; both None when it covers no days."""

    @property
    def start(self) -> dt.date | None: ...

    @property
    def end(self) -> dt.date | None: ...


@dataclass(frozen=True)
class QuarantineWrite:
    """A source's quarantine rows of a window as written, and what was left out."""

    rows: pa.Table  # the rows written
    version: int  # the quarantine table's version after the write
    erased: int  # rows left out because they hold an erased key


def quarantine_commit_metadata(entries: Mapping[str, Any]) -> dict[str, Any]:
    """Commit metadata of a quarantine commit: the writer's ``entries``, as the asset's."""
    return {"idem.asset": QUARANTINE_TABLE, **entries}


def quarantine_conditions(contract: SourceContract, window: Days) -> list[Condition]:
    """The quarantine slice that belongs to a source and window."""
    # The name was validated when the source was declared; OneOf checks it again.
    conditions: list[Condition] = [OneOf("source", contract.name, frozenset({contract.name}))]
    if contract.daily and window.start is not None and window.end is not None:
        conditions.append(date_range("partition_date", window.start, window.end))
    return conditions


def replace_quarantine(
    target: LakeTable, contract: SourceContract, rows: pa.Table, window: Days
) -> int:
    """Replace this source's quarantine rows for the window; returns the table version."""
    result = overwrite_slice(
        target,
        rows,
        quarantine_conditions(contract, window),
        partition_by=list(QUARANTINE_PARTITIONS),
        schema=quarantine_schema(),
        commit=Commit(quarantine_commit_metadata({"idem.source": contract.name})),
    )
    return result.version


def append_quarantine(
    target: LakeTable, rows: pa.Table, app_id: str, version: int, entries: Mapping[str, Any]
) -> WriteResult:
    """Append a stream batch's quarantine rows once: txn ``app_id``, ``version``."""
    ensure_quarantine_table(target)
    return append_exactly_once(
        target,
        rows,
        app_id,
        version,
        schema=quarantine_schema(),
        commit=Commit(quarantine_commit_metadata(entries)),
    )


def ensure_quarantine_table(target: LakeTable) -> None:
    """Create the shared quarantine table (empty, usual layout) if it does not exist yet."""
    if target.open() is not None:
        return
    try:
        create_table(
            target,
            quarantine_schema().empty_table(),
            commit_properties(quarantine_commit_metadata({})),
            partition_by=QUARANTINE_PARTITIONS,
        )
    except DeltaError as error:
        # Losing the creation race is fine: the winner made the same empty table.
        if not (is_conflict(error) and target.exists()):
            raise
