"""dagster-delta's modes ``error`` and ``ignore``: create the table once, with
``lake.tables``' ``create_table``.

- error: create the table; a rerun that holds what the table holds is a no-op, anything
  else is refused as delta-rs's ``mode="error"`` is.
- ignore: create the table if there is none, else leave it.
"""

from __future__ import annotations

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.writes.strategy import ModeStrategy, WriteRequest
from idem_assets.lake import Proof, WriteResult, fingerprint, read_rows
from idem_assets.lake.commits import Attempt, commit_retried
from idem_assets.lake.tables import create_table


class Create(ModeStrategy):
    """The table created from the batch, once."""

    name = "create"

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """Create the table; an existing one is left (ignore) or must hold the rows (error)."""
        plan, target, rows, content = self.plan, request.target, batch.rows, batch.fingerprint
        properties = request.commit.properties({"idem.fingerprint": str(content)})

        def once(attempt: Attempt) -> WriteResult:
            table = attempt.table
            if table is not None:
                if plan.mode == "ignore":
                    return attempt.unchanged(content, proof=Proof.TABLE_EXISTS)
                if fingerprint(read_rows(table)) == content:
                    return attempt.unchanged(content, proof=Proof.CONTENT)
                raise FileExistsError(
                    f"mode='error': a Delta table already exists at {target.uri} and holds "
                    "other rows than this output; nothing was written"
                )
            create_table(target, rows, properties, request.commit.options, plan.partition_by)
            return attempt.inserted(0, rows.num_rows, content)

        return commit_retried(target, plan.mode, once)
