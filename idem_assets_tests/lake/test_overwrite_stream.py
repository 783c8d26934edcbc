"""Streamed overwrite: record batches staged as they come, one commit, same content."""

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from idem_assets.lake import (
    LakeTable,
    PartitionMismatchError,
    fingerprint,
    overwrite_partitions,
    overwrite_stream,
    read_rows,
)
from idem_assets.lake.staging import STREAM_PREFIX, stage_batches
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.lake.rows import day, order, orders_table

START, END = day("2024-03-01"), day("2024-03-03")


def _stream(table: pa.Table, rows_per_batch: int = 4) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(rows_per_batch))


def _days(n: int, start_id: int = 0, days: int = 2) -> pa.Table:
    return orders_table([order(start_id + i, f"2024-03-0{1 + i % days}") for i in range(n)])


def _write(target, rows, **kwargs):
    return overwrite_stream(
        target, _stream(rows), "order_date", START, END, schema=ORDERS.schema, **kwargs
    )


def _ids(target):
    return sorted(r["order_id"] for r in read_rows(target.open()).to_pylist())


def _staging_folders(target):
    return [p.name for p in Path(target.uri).iterdir() if p.name.startswith(STREAM_PREFIX)]


def test_stream_writes_what_the_table_path_writes(tmp_path):
    rows = _days(30)
    streamed = LakeTable(str(tmp_path / "streamed"))
    result = _write(streamed, rows)
    whole = LakeTable(str(tmp_path / "whole"))
    overwrite_partitions(whole, rows, "order_date", START, END, schema=ORDERS.schema)
    assert result.committed and result.version == 0 and result.rows_written == 30
    assert result.fingerprint == fingerprint(rows)
    assert fingerprint(read_rows(streamed.open())) == fingerprint(read_rows(whole.open()))
    table = DeltaTable(streamed.uri)
    assert table.metadata().partition_columns == ["order_date"]
    partitions = {
        a["partition.order_date"] for a in pa.table(table.get_add_actions(flatten=True)).to_pylist()
    }
    assert partitions == {dt.date(2024, 3, 1), dt.date(2024, 3, 2)}


def test_rerun_of_the_same_stream_commits_nothing(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    first = _write(target, _days(10))
    again = _write(target, _days(10))
    assert first.committed and not again.committed
    assert again.proof == "content" and again.fingerprint == first.fingerprint
    assert DeltaTable(target.uri).version() == 0
    assert _staging_folders(target) == [_staging_folders(target)[0]]  # only the committed one


def test_stream_replaces_every_day_of_the_range_in_one_commit(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(target, _days(10))
    # The new stream has rows on the first day only: the second day must end up empty.
    again = _write(target, _days(6, start_id=100, days=1))
    assert again.version == 1 and again.committed
    assert _ids(target) == list(range(100, 106))
    assert {r["order_date"] for r in read_rows(target.open()).to_pylist()} == {START}


def test_a_batch_outside_the_range_stops_the_write_and_leaves_nothing(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(target, _days(8))
    before = (_ids(target), _staging_folders(target))
    # The bad row sits in the last batch: earlier batches were already staged.
    bad = pa.concat_tables([_days(12, start_id=50), orders_table([order(99, "2024-04-01")])])
    with pytest.raises(PartitionMismatchError, match=r"1 row\(s\) have order_date not in"):
        _write(target, bad)
    assert DeltaTable(target.uri).version() == 0
    assert (_ids(target), _staging_folders(target)) == before


def test_a_failing_source_leaves_the_table_and_lake_as_they_were(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(target, _days(8))
    before = _staging_folders(target)

    def broken():
        yield from _days(8, start_id=20).to_batches(4)
        raise OSError("landing file vanished mid-read")

    with pytest.raises(OSError, match="vanished"):
        overwrite_stream(
            target,
            pa.RecordBatchReader.from_batches(ORDERS.schema, broken()),
            "order_date",
            START,
            END,
        )
    assert DeltaTable(target.uri).version() == 0 and _ids(target) == list(range(8))
    assert _staging_folders(target) == before


def test_a_race_lost_while_streaming_is_decided_again_on_the_new_snapshot(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    _write(target, _days(4))

    def interleaved():
        yield from _days(4, start_id=10).to_batches(2)
        # Another run commits to the same range while this stream is still being read.
        overwrite_partitions(LakeTable(target.uri), _days(3, start_id=70), "order_date", START, END)
        yield from _days(4, start_id=30).to_batches(2)

    result = overwrite_stream(
        target,
        pa.RecordBatchReader.from_batches(ORDERS.schema, interleaved()),
        "order_date",
        START,
        END,
    )
    assert result.committed and result.version == 2
    assert _ids(target) == [10, 11, 12, 13, 30, 31, 32, 33]


def test_staged_files_roll_over_and_describe_their_rows(tmp_path):
    target = LakeTable(str(tmp_path / "orders"))
    rows = _days(25)
    schema = rows.schema
    tables = [pa.Table.from_batches([b]) for b in rows.to_batches(3)]
    staged = stage_batches(target, tables, schema, "order_date", rows_per_file=5)
    assert staged.rows == 25 and len(staged.files) > 2
    assert {f.partition_value for f in staged.files} == {"2024-03-01", "2024-03-02"}
    assert fingerprint(pa.concat_tables(list(staged.batches(schema)))) == fingerprint(rows)
    staged.discard()
    assert _staging_folders(target) == []
