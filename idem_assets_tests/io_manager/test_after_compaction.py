"""After compaction an unchanged rerun still commits nothing: by content, then by checkpoint.

Compaction replaces a slice's files with others holding the same rows, so the checkpoint's
file signature no longer vouches for the slice. The first rerun must find the content equal
(and sign the new files), the next one prove it from the checkpoint again.
"""

import datetime as dt

import dagster as dg

from idem_assets.io_manager import IdempotentDeltaIOManager, WriteSpec
from idem_assets.lake import LakeTable, fingerprint, read_rows
from idem_assets.lake.maintenance import compact
from idem_assets.partitions import daily_partitions
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.lake.rows import order, orders_table

FIRST, SECOND = "2024-03-01", "2024-03-02"
SPEC = WriteSpec(
    strategy="merge",
    natural_key=("order_id",),
    version_column="updated_at",
    partition_column="order_date",
)


@dg.asset(
    name="late_orders",
    partitions_def=daily_partitions(dt.date(2024, 3, 1)),
    io_manager_key="lake_io",
    metadata=SPEC.to_metadata(),
)
def late_orders(context: dg.AssetExecutionContext):
    """Each day lands ten orders of the first day: the second day's arrive late."""
    start = 0 if context.partition_key == FIRST else 10
    return orders_table([order(i, FIRST) for i in range(start, start + 10)])


def _run(tmp_path, day: str) -> dict:
    lake = LakeResource(landing_dir=str(tmp_path / "landing"), lake_dir=str(tmp_path / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}")
    result = dg.materialize(
        [late_orders],
        partition_key=day,
        resources={"lake_io": IdempotentDeltaIOManager(lake=lake, checkpoint=checkpoint)},
    )
    event = result.asset_materializations_for_node("late_orders")[0]
    return {key: value.value for key, value in event.metadata.items()}


def test_an_unchanged_rerun_after_compaction_commits_nothing(tmp_path):
    assert _run(tmp_path, FIRST)["committed"] is True
    assert _run(tmp_path, SECOND)["committed"] is True
    target = LakeTable(str(tmp_path / "lake" / "late_orders"))
    assert len(target.open().file_uris()) == 2  # the late orders added a second file
    stored = fingerprint(read_rows(target.open()))

    done = compact(target)
    assert done.committed and len(target.open().file_uris()) == 1
    compacted = target.open().version()

    first = _run(tmp_path, SECOND)
    assert (first["committed"], first["no_op_proof"]) == (False, "content")
    second = _run(tmp_path, SECOND)
    assert (second["committed"], second["no_op_proof"]) == (False, "checkpoint")
    assert target.open().version() == compacted
    assert fingerprint(read_rows(target.open())) == stored
