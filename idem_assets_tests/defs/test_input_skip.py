"""Reruns skip recomputation only when landing bytes, code version and slice files match."""

import dataclasses
import datetime as dt

from deltalake import write_deltalake

from idem_assets.defs.sales.assets import ORDERS_TABLE
from idem_assets.io_manager import Window
from idem_assets.lake import read_rows
from idem_assets.lib.landing_io import input_signature, list_window
from idem_assets.resources import LakeResource
from idem_assets.sample.generator import write_late_orders
from idem_assets_tests.harness import START, check_results, day_keys, materialization_metadata

WINDOW = Window(START, START + dt.timedelta(days=1))


def _signature(project, definition, window):
    listing = list_window(project.lake, definition.landing_source, window)
    return input_signature(definition, listing, window)


def test_signature_moves_with_bytes_code_and_window(project):
    base = _signature(project, ORDERS_TABLE, WINDOW)
    assert base == _signature(project, ORDERS_TABLE, WINDOW)
    bumped = dataclasses.replace(ORDERS_TABLE, code_version="2")
    assert _signature(project, bumped, WINDOW) != base
    wider = Window(START, START + dt.timedelta(days=2))
    assert _signature(project, ORDERS_TABLE, wider) != base
    write_late_orders(project.landing, START, seed=1, n=2)
    assert _signature(project, ORDERS_TABLE, WINDOW) != base


def test_rerun_skips_then_recomputes_when_a_file_lands(project):
    key = START.isoformat()
    first = project.run_days(key, assets=["orders"])
    skipped = project.run_days(key, assets=["orders"])
    assert materialization_metadata(skipped)["orders"]["no_op_proof"] == "inputs"
    write_late_orders(project.landing, START, seed=4, n=3)
    again = project.run_days(key, assets=["orders"])
    md = materialization_metadata(again)["orders"]
    assert md["committed"] is True and md["no_op_proof"] == ""
    assert md["fingerprint"] != materialization_metadata(first)["orders"]["fingerprint"]
    assert all(check_results(again).values())


def test_a_slice_changed_behind_the_pipeline_is_recomputed_not_skipped(project):
    key = START.isoformat()
    assert project.run_days(key, assets=["orders"]).success
    table = project.lake.table("orders").open()
    rows = read_rows(table).slice(0, 3)
    write_deltalake(
        table, rows, mode="overwrite", predicate=f"order_date = DATE '{key}'"
    )  # test-only constant
    repaired = project.run_days(key, assets=["orders"])
    md = materialization_metadata(repaired)["orders"]
    assert md["committed"] is True and md["dagster/row_count"] > 3
    assert all(check_results(repaired).values())


def test_unchanged_rerun_proves_inputs_by_file_stamps_without_reading_them(project):
    key = START.isoformat()
    # Hashes of files changed in the last file_settle_seconds are not kept (racy stamps);
    # these were written a moment ago, so keep them at once instead of waiting.
    lake = project.lake
    settled = LakeResource(
        landing_dir=lake.landing_dir, lake_dir=lake.lake_dir, file_settle_seconds=0.0
    )
    project = dataclasses.replace(project, lake=settled)
    first = materialization_metadata(project.run_days(key, assets=["orders"]))["orders"]
    files = first["landing_files"]
    assert files > 0
    assert (first["input_files_hashed"], first["input_files_hash_reused"]) == (files, 0)
    again = materialization_metadata(project.run_days(key, assets=["orders"]))["orders"]
    assert again["no_op_proof"] == "inputs"
    assert (again["input_files_hashed"], again["input_files_hash_reused"]) == (0, files)
    # A new file is hashed (it is fresh, so read), the others still come from their stamps.
    write_late_orders(project.landing, START, seed=4, n=3)
    third = materialization_metadata(project.run_days(key, assets=["orders"]))["orders"]
    assert third["committed"] is True
    assert (third["input_files_hashed"], third["input_files_hash_reused"]) == (1, files)


def _files_by_partition(result) -> dict[str, list[dict]]:
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        if mat.asset_key.to_user_string() == "orders":
            out[mat.partition] = mat.metadata["files"].value
    return out


def test_each_day_of_a_range_lists_its_own_files_first_run_and_rerun(project):
    """Every partition of a range names the landing files of its own day, with their hashes
    (and rows, where the run read them), not the run's first files repeated on each day."""
    keys = day_keys(3)
    first = project.run_days(keys[0], keys[-1], assets=["orders"])
    rerun = project.run_days(keys[0], keys[-1], assets=["orders"])
    assert materialization_metadata(rerun)["orders"]["no_op_proof"] == "inputs"
    for result in (first, rerun):
        listed = _files_by_partition(result)
        assert sorted(listed) == keys
        for key, files in listed.items():
            on_disk = sorted(
                p.relative_to(project.landing).as_posix()
                for p in (project.landing / "orders" / f"date={key}").iterdir()
            )
            assert sorted(f["file"] for f in files) == on_disk, key
            assert all(len(f["sha256"]) == 12 for f in files)
    read = _files_by_partition(first)
    assert all(f["rows"] > 0 for files in read.values() for f in files)
    assert "files" not in {
        k for k in materialization_metadata(first)["orders"] if k != "files"
    } and materialization_metadata(first)["orders"]["landing_files"] == sum(
        len(files) for files in read.values()
    )
