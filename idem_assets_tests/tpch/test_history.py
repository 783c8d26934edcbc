"""A team's whole history: 2,406 days of TPC-H orders as one range and as chunks.

tpchgen-cli's orders (scale 0.01), one Parquet file per ``o_orderdate`` from 1992-01-01 to
1998-08-02, loaded by the shipped ``tpch_orders`` declaration (its checks are proven
elsewhere; these runs select the asset alone so that a history costs seconds):

- as one range: one run and one commit, its write record as small as a day's though it
  covers 2,406 files; an unchanged rerun commits nothing, proven from metadata without
  reading a file; a corrected day is exactly one commit and changes that day alone;
- as chunks of at most 500 days in random order, two of them written at once by separate
  processes: the same table; rerun chunk by chunk, or as one range, nothing commits.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from decimal import Decimal
from pathlib import Path
from unittest import mock

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.lake import read_rows
from idem_assets.lake.fingerprint import fingerprints_by
from idem_assets.resources import CheckpointResource
from idem_assets.sample.tpch import TPCH_FIRST_DAY, lay_out_tpch
from idem_assets.sources import load_source
from idem_assets_tests.harness import Project, declared_definitions, materialization_metadata
from idem_assets_tests.reliability.test_concurrency import start_together
from idem_assets_tests.reliability.world import spawn_runs

pytestmark = pytest.mark.slow

DECLARATION = Path(__file__).resolve().parents[2] / "idem_assets/defs/tpch/orders/defs.yaml"
ASSET = "tpch_orders"
DAYS = 2406
LAST_DAY = TPCH_FIRST_DAY + dt.timedelta(days=DAYS - 1)
CHUNK_DAYS = 500
CORRECTED = dt.date(1995, 6, 17)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """The landing zone: 2,406 days of TPC-H at scale 0.01."""
    landing = tmp_path_factory.mktemp("history-landing")
    summary = lay_out_tpch(landing, 0.01, DAYS)
    # At this scale a few days have no order at all: empty days, with no folder.
    assert DAYS - 10 < summary.files["orders"] < DAYS
    return landing


def files_of(landing: Path) -> int:
    """How many order files the history has (one per day with orders)."""
    return len(list(landing.glob("tpch/orders/*/*.parquet")))


class History:
    """The tpch_orders declaration over a landing zone, with a lake of its own."""

    def __init__(self, landing: Path, root: Path) -> None:
        # The shipped declaration's partitions end where `make tpch-data`'s 31 days end.
        with mock.patch.dict(os.environ, {"IDEM_TPCH_LAST_DAY": LAST_DAY.isoformat()}):
            source = load_source(DECLARATION)
        defs, self.lake = declared_definitions([source], landing, root)
        alone = dg.define_asset_job(
            "history", selection=dg.AssetSelection.assets(ASSET).without_checks()
        )
        self.job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def(
            alone.name
        )
        self.state_url = f"sqlite:///{root / 'state.db'}"
        self.instance = dg.DagsterInstance.ephemeral()
        self.project = Project(
            root=root,
            lake=self.lake,
            checkpoint=CheckpointResource(url=self.state_url),
            instance=self.instance,
        )

    def run(self, first: dt.date, last: dt.date | None = None) -> dict:
        """One run of the days [first, last] (one day without ``last``); its metadata."""
        if last is None:
            result = self.job.execute_in_process(
                partition_key=first.isoformat(), instance=self.instance, raise_on_error=False
            )
        else:
            result = self.job.execute_in_process(
                tags={
                    "dagster/asset_partition_range_start": first.isoformat(),
                    "dagster/asset_partition_range_end": last.isoformat(),
                },
                instance=self.instance,
                raise_on_error=False,
            )
        assert result.success
        return materialization_metadata(result)[ASSET]

    def version(self) -> int:
        """The table's Delta version."""
        table = self.lake.table(ASSET).open()
        assert table is not None
        return table.version()

    def by_day(self) -> dict:
        """The fingerprint of each day's stored rows."""
        return fingerprints_by(read_rows(self.lake.table(ASSET).open()), "o_orderdate")


def chunks() -> list[tuple[dt.date, dt.date]]:
    """The history in runs of at most CHUNK_DAYS days, as a multi-run backfill splits it."""
    out, start = [], TPCH_FIRST_DAY
    while start <= LAST_DAY:
        last = min(start + dt.timedelta(days=CHUNK_DAYS - 1), LAST_DAY)
        out.append((start, last))
        start = last + dt.timedelta(days=1)
    return out


def private_copy(history: Path, landing: Path, day: dt.date) -> None:
    """Replace a linked day folder of ``landing`` by a copy of its files, to correct."""
    folder = landing / "tpch" / "orders" / f"date={day}"
    folder.unlink()
    folder.mkdir()
    for source in (history / "tpch" / "orders" / f"date={day}").iterdir():
        (folder / source.name).write_bytes(source.read_bytes())


def correct_one_order(landing: Path, day: dt.date) -> None:
    """A producer re-exports a day with one order's total price corrected."""
    [path] = (landing / "tpch" / "orders" / f"date={day}").glob("*.parquet")
    rows = pq.read_table(path)
    prices = rows.column("o_totalprice").to_pylist()
    prices[0] += Decimal("1.00")
    index = rows.schema.get_field_index("o_totalprice")
    fixed = rows.set_column(
        index, rows.schema.field(index), pa.array(prices, rows.schema.field(index).type)
    )
    pq.write_table(fixed, path)


@pytest.fixture(scope="module")
def loaded(history, tmp_path_factory) -> tuple[History, dict]:
    """The whole history loaded as one range into a lake of its own, and that run's metadata."""
    lake = History(history, tmp_path_factory.mktemp("one-range"))
    return lake, lake.run(TPCH_FIRST_DAY, LAST_DAY)


def test_the_whole_history_is_one_commit_and_an_unchanged_rerun_reads_no_file(history, loaded):
    lake, first = loaded
    assert (first["committed"], first["delta_version"]) == (True, 0)
    assert first["input_files_hashed"] == files_of(history)
    rows = sum(pq.read_metadata(p).num_rows for p in history.rglob("orders/*/*.parquet"))
    assert read_rows(lake.lake.table(ASSET).open()).num_rows == rows

    # The record of a write covering 2,406 files is as small as a day's.
    with open_store(lake.state_url) as store:
        [record] = store.list(f"lake/{ASSET}")
    assert record.status is Status.SUCCEEDED
    assert len(json.dumps(record.result)) < 2048, record.result

    again = lake.run(TPCH_FIRST_DAY, LAST_DAY)
    assert (again["committed"], again["no_op_proof"]) == (False, "inputs")
    assert (again["input_files_hashed"], again["input_files_hash_reused"]) == (
        0,
        files_of(history),
    )
    assert lake.version() == 0


def test_a_corrected_day_is_exactly_one_commit_of_that_day(history, tmp_path):
    landing = tmp_path / "landing"
    (landing / "tpch" / "orders").mkdir(parents=True)
    for day_folder in (history / "tpch" / "orders").iterdir():  # linked, not copied
        (landing / "tpch" / "orders" / day_folder.name).symlink_to(day_folder)
    lake = History(landing, tmp_path / "work")
    lake.run(TPCH_FIRST_DAY, LAST_DAY)
    before = lake.by_day()

    # A producer re-exports one day: its own run commits once and changes that day alone.
    private_copy(history, landing, CORRECTED)
    correct_one_order(landing, CORRECTED)
    fixed = lake.run(CORRECTED)
    assert (fixed["committed"], fixed["delta_version"]) == (True, 1)
    after = lake.by_day()
    assert [day for day in after if after[day] != before[day]] == [CORRECTED]
    assert after.keys() == before.keys()

    # Another day corrected, found by a rerun of the whole history: one commit again,
    # which rewrites that day's files alone (the day corrected before is left as stored).
    second = TPCH_FIRST_DAY + dt.timedelta(days=1000)
    private_copy(history, landing, second)
    correct_one_order(landing, second)
    whole = lake.run(TPCH_FIRST_DAY, LAST_DAY)
    assert (whole["committed"], whole["delta_version"]) == (True, 2)
    final = lake.by_day()
    assert [day for day in final if final[day] != after[day]] == [second]


@pytest.mark.timeout(1200)  # ~70 s on a quiet machine; several times that under load
def test_chunks_in_any_order_two_at_once_give_the_one_range_table(history, loaded, tmp_path):
    reference, _ = loaded
    lake = History(history, tmp_path / "chunks")
    order = chunks()
    random.Random(2406).shuffle(order)
    alone, pair = order[:-2], order[-2:]
    for first, last in alone:
        assert lake.run(first, last)["committed"] is True
    # Two chunks written at once by two processes: disjoint days of one table.
    work, go = tmp_path / "pair", tmp_path / "pair" / "go"
    ready = [work / f"ready-{n}" for n in range(2)]
    children = [
        spawn_runs(
            lake.project,
            work,
            "",
            [[first.isoformat(), last.isoformat()]],
            assets=[ASSET],
            without_checks=True,
            go_file=str(go),
            ready_file=str(flag),
        )
        for (first, last), flag in zip(pair, ready, strict=True)
    ]
    for outcome, (first, last) in zip(start_together(children, ready, go), pair, strict=True):
        assert outcome.returncode == 0, outcome.tail()
        [run] = outcome.runs
        if not run["success"]:  # lost the commit race: its rerun writes the chunk
            assert lake.run(first, last)["committed"] is True
    assert lake.version() == len(order) - 1  # one commit per chunk
    assert lake.by_day() == reference.by_day()

    # Rerun chunk by chunk, in another order: proven from metadata, nothing commits.
    random.Random(7).shuffle(order)
    for first, last in order:
        rerun = lake.run(first, last)
        assert (rerun["committed"], rerun["no_op_proof"]) == (False, "inputs")
    # The whole range over the chunk-loaded table: recomputed once, found equal.
    whole = lake.run(TPCH_FIRST_DAY, LAST_DAY)
    assert whole["committed"] is False
    assert lake.version() == len(order) - 1
