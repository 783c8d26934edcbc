"""An asset may hand the IO manager a record-batch stream: written in one commit, tracked."""

import datetime as dt

import dagster as dg
import pyarrow as pa
import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.io_manager import IdempotentDeltaIOManager, WriteSpec
from idem_assets.lake import fingerprint, read_rows
from idem_assets.partitions import daily_partitions
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.lake.rows import order, orders_table

DAY = "2024-03-05"
SPEC = WriteSpec(
    strategy="overwrite", partition_column="order_date", natural_key=("order_id",), dedupe=False
)


def _rows(n: int) -> pa.Table:
    return orders_table([order(i, DAY) for i in range(n)])


def _asset(spec: WriteSpec, rows: pa.Table, name: str = "big_orders") -> dg.AssetsDefinition:
    @dg.asset(
        name=name,
        partitions_def=daily_partitions(dt.date(2024, 3, 1)),
        io_manager_key="lake_io",
        metadata=spec.to_metadata(),
    )
    def streamed() -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches(max_chunksize=7))

    return streamed


def _materialize(tmp_path, asset: dg.AssetsDefinition, raise_on_error: bool = True):
    lake = LakeResource(landing_dir=str(tmp_path / "landing"), lake_dir=str(tmp_path / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{tmp_path / 'state.db'}")
    result = dg.materialize(
        [asset],
        partition_key=DAY,
        raise_on_error=raise_on_error,
        resources={"lake_io": IdempotentDeltaIOManager(lake=lake, checkpoint=checkpoint)},
    )
    return result, lake, checkpoint


def _metadata(result) -> dict:
    event = result.asset_materializations_for_node("big_orders")[0]
    return {k: v.value for k, v in event.metadata.items()}


def test_streamed_output_is_written_tracked_and_fingerprinted(tmp_path):
    rows = _rows(50)
    result, lake, checkpoint = _materialize(tmp_path, _asset(SPEC, rows))
    md = _metadata(result)
    assert md["streamed"] is True and md["committed"] is True
    assert md["dagster/row_count"] == 50 and md["fingerprint"] == str(fingerprint(rows))
    stored = read_rows(lake.table("big_orders").open())
    assert fingerprint(stored) == fingerprint(rows)
    assert stored.column("order_date").to_pylist() == [dt.date(2024, 3, 5)] * 50
    with open_store(checkpoint.resolved_url) as store:
        records = store.list("lake/big_orders")
    assert [r.status for r in records] == [Status.SUCCEEDED]
    assert records[0].result["fingerprint"] == md["fingerprint"]


def test_a_stream_with_a_row_of_another_day_fails_and_writes_nothing(tmp_path):
    rows = pa.concat_tables([_rows(20), orders_table([order(99, "2024-03-06")])])
    result, lake, _ = _materialize(tmp_path, _asset(SPEC, rows), raise_on_error=False)
    assert not result.success
    failure = result.failure_data_for_node("big_orders")
    assert "not in [2024-03-05, 2024-03-06)" in failure.error.cause.message
    assert lake.table("big_orders").open() is None


@pytest.mark.parametrize(
    "spec",
    [
        WriteSpec(
            strategy="overwrite",
            partition_column="order_date",
            natural_key=("order_id",),
            dedupe=True,
        ),
        WriteSpec(strategy="merge", natural_key=("order_id",), version_column="updated_at"),
    ],
)
def test_a_stream_that_needs_the_whole_batch_is_read_first_and_written_as_a_table(tmp_path, spec):
    rows = pa.concat_tables([_rows(5), _rows(5)])  # every order twice
    result, lake, checkpoint = _materialize(tmp_path, _asset(spec, rows))
    md = _metadata(result)
    assert md["streamed"] is False and md["committed"] is True
    assert md["duplicates_dropped"] == 5 and md["dagster/row_count"] == 5
    stored = read_rows(lake.table("big_orders").open())
    assert sorted(stored.column("order_id").to_pylist()) == sorted(
        _rows(5).column("order_id").to_pylist()
    )
    with open_store(checkpoint.resolved_url) as store:
        assert [r.status for r in store.list("lake/big_orders")] == [Status.SUCCEEDED]


def test_rerun_of_an_unchanged_stream_is_proven_by_the_checkpoint_and_commits_nothing(tmp_path):
    rows = _rows(40)
    first, lake, _ = _materialize(tmp_path, _asset(SPEC, rows))
    again, _, _ = _materialize(tmp_path, _asset(SPEC, rows))
    md = _metadata(again)
    assert md["committed"] is False and md["no_op_proof"] == "checkpoint"
    assert md["fingerprint"] == _metadata(first)["fingerprint"]
    assert lake.table("big_orders").open().version() == 0
    changed, _, _ = _materialize(tmp_path, _asset(SPEC, _rows(41)))
    assert _metadata(changed)["committed"] is True
    assert lake.table("big_orders").open().version() == 1
