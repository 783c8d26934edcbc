"""10,000 landing files in one range: the write record stays small, the rerun reads none.

A feed delivering 25 small CSV exports a day for 400 days is loaded as one range. The
write's checkpoint record keeps the window's digest, not 10,000 file hashes (those are
memos, one row per file), so it settles however many files a range covers; an unchanged
rerun proves its inputs from the listing and the kept hashes without reading a file.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets.lake import read_rows
from idem_assets.landing.store import landing_root
from idem_assets.lib.inputs import hash_scope
from idem_assets.sources import Column, DailySource
from idem_assets_tests.harness import declared_definitions, materialization_metadata

pytestmark = pytest.mark.slow

FIRST = dt.date(2021, 1, 1)
DAYS = 400
FILES_PER_DAY = 25


def _feed(landing: Path) -> DailySource:
    """A daily CSV feed: one row per export file, keyed by export id."""
    for offset in range(DAYS):
        day = FIRST + dt.timedelta(days=offset)
        folder = landing / "exports" / f"date={day}"
        folder.mkdir(parents=True)
        for n in range(FILES_PER_DAY):
            export = offset * FILES_PER_DAY + n
            path = folder / f"export-{n:03d}.csv"
            path.write_text(f"export_id,day,qty\n{export},{day},{n}\n")
    return DailySource(
        name="exports",
        first_day=FIRST,
        formats=("csv",),
        natural_key=("export_id",),
        partition_date="day",
        columns=(
            Column(name="export_id", type="int64"),
            Column(name="day", type="date"),
            Column(name="qty", type="int32"),
        ),
    )


def test_ten_thousand_files_settle_in_a_small_record_and_rerun_without_a_read(tmp_path):
    landing = tmp_path / "landing"
    source = _feed(landing)
    # The files were written a moment ago: keep their hashes at once (no settling time),
    # rather than wait for them to age.
    defs, lake = declared_definitions([source], landing, tmp_path, file_settle_seconds=0)
    alone = dg.define_asset_job(
        "exports_alone", selection=dg.AssetSelection.assets("exports").without_checks()
    )
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def(alone.name)
    instance = dg.DagsterInstance.ephemeral()
    last = FIRST + dt.timedelta(days=DAYS - 1)
    tags = {
        "dagster/asset_partition_range_start": FIRST.isoformat(),
        "dagster/asset_partition_range_end": last.isoformat(),
    }

    first = job.execute_in_process(tags=tags, instance=instance, raise_on_error=False)
    assert first.success
    written = materialization_metadata(first)["exports"]
    assert (written["committed"], written["input_files_hashed"]) == (True, DAYS * FILES_PER_DAY)
    assert read_rows(lake.table("exports").open()).num_rows == DAYS * FILES_PER_DAY

    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        [record] = store.list("lake/exports")
        relpaths = [str(p.relative_to(landing)) for p in landing.rglob("*.csv")]
        kept = store.memos(hash_scope(landing_root(str(landing))), relpaths)
    assert record.status is Status.SUCCEEDED
    assert len(json.dumps(record.result)) < 2048, record.result
    assert len(kept) == DAYS * FILES_PER_DAY

    again = job.execute_in_process(tags=tags, instance=instance, raise_on_error=False)
    assert again.success
    rerun = materialization_metadata(again)["exports"]
    assert (rerun["committed"], rerun["no_op_proof"]) == (False, "inputs")
    assert (rerun["input_files_hashed"], rerun["input_files_hash_reused"]) == (
        0,
        DAYS * FILES_PER_DAY,
    )
    assert lake.table("exports").open().version() == 0
