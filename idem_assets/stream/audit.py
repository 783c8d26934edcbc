"""Audit a stream's table against its offset log: every committed batch present exactly once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.checkpoint import CheckpointStore, Status
from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake import LakeTable, read_rows, txn_version
from idem_assets.stream.offsets import OffsetLog
from idem_assets.stream.source import SOURCE_FILE_COLUMN, STREAM_BATCH_COLUMN, StreamSource

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


_MAX_PROBLEMS = 20


@dataclass(frozen=True)
class StreamAudit:
    """What the table holds per batch compared with what the log says was committed."""

    batches: int  # succeeded batches in the log
    rows: int  # rows in the table
    txn_version: int | None
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """True when every succeeded batch is in the table exactly once and nothing else is."""
        return not self.problems


def audit_stream(store: CheckpointStore, source: StreamSource, table: LakeTable) -> StreamAudit:
    """Compare row counts and files per batch, and the txn version, with the offset log."""
    batches = OffsetLog(store, source).batches()
    opened = table.open()
    rows = read_rows(opened, source.schema, columns=[STREAM_BATCH_COLUMN, SOURCE_FILE_COLUMN])
    counts = Counter(rows.column(STREAM_BATCH_COLUMN).to_pylist())
    files_by_batch = _files_by_batch(rows)
    problems: list[str] = []
    succeeded = [b for b in batches if b.tracker.status is Status.SUCCEEDED]
    # Rows `idem-assets erase` took out of committed batches: a batch may hold fewer rows than
    # it committed, never more, and the shortfall of all batches is exactly those rows.
    erased = sum(
        int(entry.tables.get(source.name, {}).get("rows", 0))
        for entry in ErasureLedger(store).entries()
    )
    short = 0
    for batch in succeeded:
        expected = int(batch.tracker.result["rows"])
        found = counts.pop(batch.seq, 0)
        short += expected - found
        if found > expected or (found < expected and not erased):
            problems.append(f"batch {batch.seq}: {found} rows in the table, {expected} committed")
    if erased and short != erased:
        problems.append(
            f"the batches hold {short} rows fewer than they committed, but erasure took {erased}"
        )
        strangers = files_by_batch.get(batch.seq, set()) - {f.relpath for f in batch.plan.files}
        if strangers:
            problems.append(
                f"batch {batch.seq}: rows from files it does not name: "
                f"{', '.join(sorted(strangers))}"
            )
    for seq, found in sorted(counts.items()):
        problems.append(f"batch {seq}: {found} rows in the table but the log has it not succeeded")
    txn = txn_version(opened, source.app_id)
    finished = -1  # last batch of the finished prefix of the log
    for batch in batches:
        if not batch.done:
            break
        finished = batch.seq
    if finished >= 0 and (txn is None or txn < finished):
        problems.append(f"txn version {txn} is behind the last finished batch {finished}")
    return StreamAudit(len(succeeded), rows.num_rows, txn, tuple(problems[:_MAX_PROBLEMS]))


def _files_by_batch(rows: pa.Table) -> dict[int, set[str]]:
    pairs = rows.group_by([STREAM_BATCH_COLUMN, SOURCE_FILE_COLUMN]).aggregate([])
    out: dict[int, set[str]] = {}
    for seq, relpath in zip(
        pairs.column(STREAM_BATCH_COLUMN).to_pylist(),
        pairs.column(SOURCE_FILE_COLUMN).to_pylist(),
        strict=True,
    ):
        out.setdefault(seq, set()).add(relpath)
    return out
