"""``idem/strategy: replace`` (and dagster-delta's ``create_or_replace``): swap the whole
table atomically with ``lake.replace``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.writes.strategy import SpecStrategy, WriteRequest
from idem_assets.lake import WriteResult, replace_table

if TYPE_CHECKING:
    from idem_assets.lake.predicates import Condition


class Replace(SpecStrategy):
    """Swap the whole table atomically."""

    name = "replace"

    def touched(self, covered: PartitionSlice, batch: PreparedBatch | None) -> list[Condition]:
        """The whole table."""
        return []

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """One commit that replaces every row."""
        return replace_table(
            request.target,
            batch.rows,
            allow_empty=self.spec.allow_empty,
            commit=request.commit.with_fingerprint(batch.fingerprint),
        )
