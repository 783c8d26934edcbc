"""Atomic full replace of a small reference table (TRUNCATE + INSERT as one commit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.lake.commits import DEFAULT_COMMIT, Attempt, Commit, commit_retried
from idem_assets.lake.fingerprint import fingerprint, resolve
from idem_assets.lake.frames import FrameLike, conform, to_arrow
from idem_assets.lake.overwrite import replace_rows
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import LakeTable, check_columns, create_table, read_rows

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


STRATEGY = "replace"


def replace_table(
    target: LakeTable,
    data: FrameLike,
    *,
    schema: pa.Schema | None = None,
    allow_empty: bool = False,
    commit: Commit = DEFAULT_COMMIT,
) -> WriteResult:
    """Make the table hold exactly ``data`` in one commit; readers never see it empty.

    An empty replacement is refused unless ``allow_empty``: an empty snapshot is
    far more often a broken export than a real empty catalog. ``commit.options``: the
    table configuration and writer properties, ``evolve_schema`` (the output's columns
    replace the table's) and a change feed's ``change_key``.
    """
    rows = to_arrow(data)
    if schema is not None:
        rows = conform(rows, schema)
    if rows.num_rows == 0 and not allow_empty:
        raise ValueError(
            f"refusing to replace {target.uri} with an empty table; pass allow_empty=True "
            "if the source really is empty"
        )
    # Hashed beside the write: a new table needs the fingerprint only after its commit.
    pending = commit.pending_fingerprint(rows)
    properties = commit.properties()
    options = commit.options

    def once(attempt: Attempt) -> WriteResult:
        table = attempt.table
        if table is not None and fingerprint(read_rows(table)) == resolve(pending):
            return attempt.unchanged(resolve(pending), proof=Proof.CONTENT)
        if table is None:
            version = create_table(target, rows, properties, options)
        else:
            check_columns(rows, table, options, exact=True)
            made = replace_rows(table, rows, (), properties, options, schema_mode="overwrite")
            if made is None:  # a change feed's write found no row differing
                return attempt.unchanged(resolve(pending), proof=Proof.CONTENT)
            version = made
        return attempt.inserted(version, rows.num_rows, resolve(pending))

    return commit_retried(target, STRATEGY, once)
