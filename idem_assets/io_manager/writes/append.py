"""dagster-delta's ``mode: append``, exactly once, with ``lake.append``'s Delta ``txn``.

The txn app id is built here (``append_id``). A partitioned output appends once per
partition, its app id naming the asset and the partition: a rerun with the same rows
appends nothing, a rerun with other rows is refused (``AppendConflictError``: an append
cannot take back the rows it added; overwrite or merge can). An unpartitioned output
appends once per content: the same rows again append nothing, other rows append.

An append is named by the output as the asset gave it, before the rows of erased keys were
taken out (``WriteRequest.given``): a rerun after ``idem-assets erase`` gives the same rows
as before, which the table holds less the erased ones, so it appends nothing, where the
rows it writes would have named another append (refused, or appended twice).
"""

from __future__ import annotations

import dataclasses

from deltalake import DeltaTable

from idem_assets.io_manager.batch import PreparedBatch
from idem_assets.io_manager.slices import PartitionSlice
from idem_assets.io_manager.writes.strategy import ModeStrategy, WriteRequest
from idem_assets.lake import Fingerprint, WriteResult
from idem_assets.lake.append import append_exactly_once
from idem_assets.lake.delta_log import commit_infos

# The commit info entry that names the append's txn app id.
APPEND_ID_KEY = "idem.append_id"
# The commit info entry of the output an append was made from (``WriteRequest.given``).
APPEND_OUTPUT_KEY = "idem.append_output"


class AppendConflictError(RuntimeError):
    """An output appended before, now with other rows: appending again would duplicate."""


def append_id(asset: str, covered: PartitionSlice, content: Fingerprint, partitioned: bool) -> str:
    """The txn app id of an append: per partition, or per content when unpartitioned."""
    identity = covered.label if partitioned else content.digest
    return f"idem/{asset}/{identity}"


def appended_fingerprint(table: DeltaTable, app_id: str) -> str | None:
    """The fingerprint of the output ``app_id``'s append was made from (None: unknown);
    commits made before it was recorded name the rows they added."""
    for _, info in commit_infos(table, table.version() + 1):
        if info.get(APPEND_ID_KEY) == app_id:
            return info.get(APPEND_OUTPUT_KEY) or info.get("idem.fingerprint")
    return None


class Append(ModeStrategy):
    """An append committed once per partition (or per content) with a Delta txn."""

    name = "append"

    def write_rows(self, request: WriteRequest, batch: PreparedBatch) -> WriteResult:
        """The batch appended under its txn id, unless that id committed (the same rows)."""
        target, covered, content = request.target, request.covered, batch.fingerprint
        given = request.given(content)
        app_id = append_id(request.asset, covered, given, self.plan.partitioned)
        table = target.open()
        if table is not None and table.transaction_version(app_id) is not None:
            earlier = appended_fingerprint(table, app_id)
            if earlier is not None and earlier != str(given):
                raise AppendConflictError(
                    f"{target.uri} {covered.display} was appended before with other rows "
                    f"({earlier}; now {given}). An append cannot take back rows it added, "
                    "so appending again would keep both. To replace the partition, write it "
                    "with mode='overwrite' and partition_expr; to update rows by key, use "
                    "mode='merge'"
                )
        result = append_exactly_once(
            target,
            batch.rows,
            app_id,
            0,
            partition_column=self.plan.partition_by,
            commit=request.commit.with_fingerprint(content).with_metadata(
                {APPEND_ID_KEY: app_id, APPEND_OUTPUT_KEY: str(given)}
            ),
        )
        return dataclasses.replace(result, details={**result.details, "txn_app_id": app_id})
