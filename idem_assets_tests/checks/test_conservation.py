"""Conservation of a merge with deletes: its outcome, and what it reads of the table.

The check reads the table as the write of its batch reads it: within the batch's
``[min, max]`` of the prune columns (``pruning_ranges``, the write's own rule), so a 1-day
check of a table with many days stored reads that day's files, not the whole table.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from idem_assets.lake import read_rows
from idem_assets.lake.merge import pruning_ranges
from idem_assets.lake.predicates import conjunction
from idem_assets.sources.load import declaration_from_mapping
from idem_assets_tests.harness import START, check_results, day_keys, declared_definitions

DAYS, ORDERS = 12, 8  # orders created per day; each order's order_date is its day
SOURCE = {
    "name": "shop_orders",
    "first_day": START.isoformat(),
    "columns": [
        {"name": "order_id", "type": "int64"},
        {"name": "order_date", "type": "date"},
        {"name": "updated_at", "type": "int64"},
        {"name": "status", "type": "string"},
        {"name": "op", "type": "string"},
    ],
    "natural_key": ["order_id"],
    "version": "updated_at",
    "strategy": "merge",
    "delete_marker": {"column": "op", "value": "D"},
    # Fixed for an order: the write reads and merges only the files of the batch's days.
    "prune_columns": ["order_date"],
}


def _day_rows(index: int) -> list[dict]:
    """A day's change set: its new orders, an update of one, a delete of another."""
    day = START + dt.timedelta(days=index)
    first = index * 100
    rows = [
        {"order_id": first + i, "order_date": day, "updated_at": 1, "status": "new", "op": "I"}
        for i in range(ORDERS)
    ]
    rows.append({**rows[0], "updated_at": 2, "status": "paid", "op": "U"})
    rows.append({**rows[1], "updated_at": 2, "status": "", "op": "D"})
    return rows


def _lay_out(landing: Path) -> None:
    for index in range(DAYS):
        day = START + dt.timedelta(days=index)
        folder = landing / "shop_orders" / f"date={day}"
        folder.mkdir(parents=True)
        with (folder / "changes.csv").open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=[c["name"] for c in SOURCE["columns"]])
            writer.writeheader()
            writer.writerows(_day_rows(index))


@dataclass
class Scan:
    """One scan of a Delta table: its predicate, the rows it streamed and the data files the
    predicate leaves."""

    uri: str
    predicate: str | None
    rows: int
    files: int


@contextlib.contextmanager
def scans() -> Iterator[list[Scan]]:
    """Every ``DeltaTable.scan`` made meanwhile, with the rows it streamed and the files its
    predicate leaves (Delta's own file pruning)."""
    original = DeltaTable.scan
    seen: list[Scan] = []

    def counted(table: DeltaTable, columns=None, predicate=None) -> pa.RecordBatchReader:
        reader = original(table, columns=columns, predicate=predicate)
        read = pa.RecordBatchReader.from_stream(reader).read_all()
        files = table.file_uris(file_pruning_predicate=predicate) if predicate else None
        seen.append(
            Scan(
                table.table_uri.rstrip("/"),
                predicate,
                read.num_rows,
                len(files if files is not None else table.file_uris()),
            )
        )
        return read.to_reader()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DeltaTable, "scan", counted)
        yield seen


@pytest.fixture
def loaded(tmp_path):
    """Every day loaded, one run a day, and a job of the conservation check alone."""
    landing = tmp_path / "landing"
    _lay_out(landing)
    defs, lake = declared_definitions([declaration_from_mapping(SOURCE, "test")], landing, tmp_path)
    jobs = dg.Definitions(
        jobs=[
            dg.define_asset_job("load", selection=dg.AssetSelection.assets("shop_orders")),
            # Conservation alone: the scans made while it runs are its own.
            dg.define_asset_job(
                "conservation",
                selection=dg.AssetSelection.checks(
                    dg.AssetCheckKey(dg.AssetKey("shop_orders"), "conservation")
                ),
            ),
        ]
    )
    merged = dg.Definitions.merge(defs, jobs)
    instance = dg.DagsterInstance.ephemeral()
    for key in day_keys(DAYS):
        result = merged.resolve_job_def("load").execute_in_process(
            partition_key=key, instance=instance
        )
        assert all(check_results(result).values()), check_results(result)
    return merged, lake, instance


def _check_day(loaded, day: str) -> tuple[dict, list[Scan]]:
    """The conservation result of ``day`` (outcome and metadata values), checked alone, and
    the scans of the table it made."""
    merged, lake, instance = loaded
    uri = lake.table("shop_orders").open().table_uri.rstrip("/")
    with scans() as seen:
        result = merged.resolve_job_def("conservation").execute_in_process(
            tags={
                "dagster/asset_partition_range_start": day,
                "dagster/asset_partition_range_end": day,
            },
            instance=instance,
            raise_on_error=False,
        )
    (evaluation,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "conservation"
    ]
    meta = {k: getattr(v, "value", v) for k, v in evaluation.metadata.items()}
    return {"passed": evaluation.passed, **meta}, [s for s in seen if s.uri == uri]


def test_conservation_with_deletes_accounts_for_every_row_of_the_day(loaded):
    outcome, _ = _check_day(loaded, day_keys(DAYS)[5])
    # With deletes every event is kept (the merge orders a key's events itself): the 8
    # inserts, the update and the delete are each stored, beaten by a newer event, or gone.
    assert outcome == {
        "passed": True,
        "partition_range": "[2024-03-06, 2024-03-07)",
        "raw_rows": ORDERS + 2,
        "loaded": ORDERS + 2,
        "duplicates_dropped": 0,
        "quarantined": 0,
        "erased": 0,
        "unaccounted": 0,
        "expected_loaded": ORDERS + 2,
        "carried_forward": False,  # evaluated now, on the table as it is
    }


def test_a_deleted_order_written_back_turns_the_day_red(loaded):
    _, lake, _ = loaded
    target = lake.table("shop_orders")
    stored = read_rows(target.open())
    day = START + dt.timedelta(days=5)
    deleted = _day_rows(5)[-1]
    back = {
        "order_id": [deleted["order_id"]],
        "order_date": [day],
        "updated_at": [1],
        "status": ["new"],
    }
    write_deltalake(target.uri, pa.table(back, schema=stored.schema), mode="append")
    outcome, _ = _check_day(loaded, day.isoformat())
    # The delete is no longer accounted for: its key is stored at an older version.
    assert not outcome["passed"]
    assert outcome["loaded"] == ORDERS + 1 and outcome["unaccounted"] == 1
    # The other days are untouched, and still green.
    assert _check_day(loaded, day_keys(DAYS)[4])[0]["passed"]


def test_the_check_of_a_day_reads_the_files_its_write_reads(loaded):
    _, lake, _ = loaded
    table = lake.table("shop_orders").open()
    # What the write of day 5's batch reads: its [min, max] of the prune columns.
    batch = pa.Table.from_pylist(_day_rows(5))
    write_reads = conjunction(tuple(pruning_ranges(batch, SOURCE["prune_columns"])))
    the_day = len(table.file_uris(file_pruning_predicate=write_reads))
    stored = read_rows(table).num_rows
    assert (the_day, stored) == (1, DAYS * (ORDERS - 1))  # one file a day, 7 orders kept a day
    outcome, seen = _check_day(loaded, day_keys(DAYS)[5])
    assert outcome["passed"]
    # One read of the table, pruned as the write prunes: the day's file and orders only, not
    # the table's 12 files and 84 rows (what the check read while it ignored the pruning).
    assert [(s.predicate, s.rows, s.files) for s in seen] == [(write_reads, ORDERS - 1, 1)]
    assert len(table.file_uris()) == DAYS
