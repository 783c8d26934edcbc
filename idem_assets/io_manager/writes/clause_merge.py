"""dagster-delta's ``mode: merge``: a MERGE with the configured predicate and clauses,
written by ``lake.clauses``. Only rows a clause changes are sent; nothing to change
means no commit. (``idem/strategy: merge``, newest row per natural key, is ``merge``.)"""

from __future__ import annotations

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.writes.strategy import ModeStrategy, WriteRequest
from idem_assets.lake import WriteResult
from idem_assets.lake.clauses import merge_by_clauses


class ClauseMerge(ModeStrategy):
    """A MERGE by the output's clauses, scoped to its partitions."""

    name = "clause_merge"

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """The clauses' MERGE of the batch, committed only when a row changes."""
        plan = self.plan
        assert plan.merge is not None
        return merge_by_clauses(
            request.target,
            batch.rows,
            plan.merge,
            scope=plan.scope,
            partition_by=plan.partition_by,
            commit=request.commit.with_fingerprint(batch.fingerprint),
        )
