"""Opening and reading Delta tables, and retrying commits that lost a race."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from idem_assets.lake.predicates import Condition, OneOf

T = TypeVar("T")
StorageOptions = Mapping[str, str] | None

# Conflicts delta-rs reports as generic DeltaError; matched on its wording.
_CONFLICT_MARKERS = (
    "commit failed",
    "concurrent",
    "conflict",
    "version already exists",
    "already exists",
)


@dataclass(frozen=True)
class LakeTable:
    """Where a Delta table lives and how to reach it."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)

    def open(self, version: int | None = None) -> DeltaTable | None:
        """The table at its newest (or the given) version, or None if it does not exist."""
        try:
            return DeltaTable(self.uri, version=version, storage_options=self._options())
        except TableNotFoundError:
            return None

    def exists(self) -> bool:
        """Whether a Delta log exists at the uri."""
        return DeltaTable.is_deltatable(self.uri, storage_options=self._options())

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def options(self) -> dict[str, str] | None:
        """Storage options in the form delta-rs calls take."""
        return self._options()


def range_filter(rng: Condition) -> ds.Expression:
    """The pyarrow dataset filter equal to a condition (prunes files by partition and stats)."""
    col = pc.field(rng.column)
    if isinstance(rng, OneOf):
        return col == rng.value
    upper = col <= rng.end if rng.inclusive else col < rng.end
    return (col >= rng.start) & upper


def read_rows(
    table: DeltaTable | None,
    schema: pa.Schema | None = None,
    ranges: Sequence[Condition] = (),
    extra_filter: ds.Expression | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Rows of ``table`` within all ``ranges`` (empty table of ``schema`` if none)."""
    if table is None:
        if schema is None:
            raise ValueError("reading a missing table needs the expected schema")
        return schema.empty_table()
    dataset = table.to_pyarrow_dataset()
    predicate: ds.Expression | None = extra_filter
    for rng in ranges:
        part = range_filter(rng)
        predicate = part if predicate is None else predicate & part
    return dataset.to_table(filter=predicate, columns=list(columns) if columns else None)


def is_conflict(error: BaseException) -> bool:
    """Whether a delta-rs error means another writer committed first."""
    if isinstance(error, CommitFailedError):
        return True
    if isinstance(error, DeltaError):
        text = str(error).lower()
        return any(marker in text for marker in _CONFLICT_MARKERS)
    return False


def with_commit_retries(attempt: Callable[[int], T], retries: int = 8) -> T:
    """Run ``attempt`` again (re-reading state) when a concurrent commit beat it.

    Each attempt must start from a fresh snapshot; losers re-evaluate and usually
    find the winner already wrote the same content, so they commit nothing.
    """
    for number in range(retries + 1):
        try:
            return attempt(number)
        except (CommitFailedError, DeltaError) as error:
            if not is_conflict(error) or number == retries:
                raise
            time.sleep(min(2.0, 0.05 * 2**number) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def table_schema(table: DeltaTable) -> pa.Schema:
    """The table's schema as a pyarrow schema."""
    return pa.schema(table.schema().to_arrow())


def commit_properties(
    metadata: Mapping[str, Any], app_transactions: Sequence[Transaction] = ()
) -> CommitProperties:
    """Commit properties for every write here: our metadata and no silent rebasing.

    delta-rs retries a commit that lost a race by rebasing it onto the newer
    version; for a table-creating write (mode="error") that turns the loser into
    a plain append, duplicating the data. With internal retries off, the loser
    gets a conflict and ``with_commit_retries`` re-reads the table and decides
    again (usually: content already there, nothing to commit).
    """
    return CommitProperties(
        custom_metadata={k: str(v) for k, v in metadata.items()},
        max_commit_retries=0,
        app_transactions=list(app_transactions) or None,
    )


def files_signature(table: DeltaTable | None, conditions: Sequence[Condition] = ()) -> str:
    """Digest of the data files that may hold rows matching ``conditions`` (metadata only).

    Delta data files are immutable and uniquely named, so if this digest is unchanged
    since a write, nothing has touched that slice of the table since.
    """
    if table is None:
        return "absent"
    dataset = table.to_pyarrow_dataset()
    predicate: ds.Expression | None = None
    for condition in conditions:
        part = range_filter(condition)
        predicate = part if predicate is None else predicate & part
    paths = sorted(fragment.path for fragment in dataset.get_fragments(filter=predicate))
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.encode())
        digest.update(b"\n")
    return f"{len(paths)}:{digest.hexdigest()[:32]}"
