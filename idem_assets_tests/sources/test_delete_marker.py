"""A declared merge source with a delete marker: CSV change sets
with an op column, loaded day by day in any order and again, give the newest-event table, and
every check of every run passes."""

import csv
import datetime as dt
import random
import re
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
import yaml

from idem_assets.lake import read_rows
from idem_assets.sources.load import declaration_from_mapping
from idem_assets_tests.harness import check_results, declared_definitions
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, OP, VERSION, change_days, reference

START = dt.date(2024, 3, 1)
DECLARED = {
    "name": "crm_customers",
    "first_day": START.isoformat(),
    "columns": [
        {"name": KEY, "type": "int64"},
        {"name": VERSION, "type": "int64"},
        {"name": "segment", "type": "string"},
        {"name": OP, "type": "string"},
    ],
    "natural_key": [KEY],
    "version": VERSION,
    "strategy": "merge",
    "delete_marker": {"column": OP, "value": "D"},
}


def _lay_out(landing, changes) -> None:
    """One CSV change set per day folder."""
    for index, table in enumerate(changes):
        day = START + dt.timedelta(days=index)
        folder = landing / "crm_customers" / f"date={day}"
        folder.mkdir(parents=True)
        with (folder / "changes.csv").open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=[KEY, VERSION, "segment", OP])
            writer.writeheader()
            writer.writerows(table.to_pylist())


def test_a_declared_delete_marker_converges_in_any_order(tmp_path):
    changes = change_days(11)
    landing = tmp_path / "landing"
    _lay_out(landing, changes)
    source = declaration_from_mapping(DECLARED, "test")
    defs, lake = declared_definitions([source], landing, tmp_path)
    shown = defs.resolve_assets_def("crm_customers").metadata_by_key[dg.AssetKey("crm_customers")]
    assert [c.name for c in shown["dagster/column_schema"].columns] == [KEY, VERSION, "segment"]
    alone = dg.define_asset_job("alone", selection=dg.AssetSelection.assets("crm_customers"))
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def("alone")
    instance = dg.DagsterInstance.ephemeral()
    rng = random.Random(11)
    order = [i for i in range(DAYS) for _ in range(rng.randint(1, 2))]
    rng.shuffle(order)
    for index in order:
        key = (START + dt.timedelta(days=index)).isoformat()
        result = job.execute_in_process(partition_key=key, instance=instance)
        # Its checks too: rerun equality counts deletes, nothing is left unaccounted.
        checks = check_results(result)
        assert checks and all(checks.values()), checks
    stored = read_rows(lake.table("crm_customers").open()).to_pylist()
    assert {row[KEY]: {k: v for k, v in row.items() if k != OP} for row in stored} == reference(
        changes
    )


def test_a_delete_marker_needs_merge_and_a_version():
    with pytest.raises(
        ValueError, match="delete_marker needs strategy merge or history and a version"
    ):
        declaration_from_mapping({**DECLARED, "strategy": "overwrite"}, "test")


def test_a_deleted_key_written_back_turns_its_day_red(tmp_path):
    from deltalake import write_deltalake

    changes = change_days(12)
    landing = tmp_path / "landing"
    _lay_out(landing, changes)
    source = declaration_from_mapping(DECLARED, "test")
    defs, lake = declared_definitions([source], landing, tmp_path)
    jobs = dg.Definitions(
        jobs=[
            dg.define_asset_job("load", selection=dg.AssetSelection.assets("crm_customers")),
            dg.define_asset_job(
                "checks", selection=dg.AssetSelection.checks_for_assets("crm_customers")
            ),
        ]
    )
    merged = dg.Definitions.merge(defs, jobs)
    instance = dg.DagsterInstance.ephemeral()
    for index in range(DAYS):
        key = (START + dt.timedelta(days=index)).isoformat()
        assert (
            merged.resolve_job_def("load")
            .execute_in_process(partition_key=key, instance=instance)
            .success
        )
    # A key whose newest event is a delete, the day of that delete, and the key written back.
    gone = {r[KEY] for t in changes for r in t.to_pylist()} - set(reference(changes))
    day, deleted = max(
        ((i, r) for i, t in enumerate(changes) for r in t.to_pylist() if r[OP] == "D"),
        key=lambda pair: (pair[1][KEY] in gone, pair[1][VERSION]),
    )
    assert deleted[KEY] in gone
    target = lake.table("crm_customers")
    stored = read_rows(target.open())
    back = {name: [None] for name in stored.column_names}
    back.update({KEY: [deleted[KEY]], VERSION: [deleted[VERSION] - 1], "segment": ["smb"]})
    write_deltalake(target.uri, pa.table(back, schema=stored.schema), mode="append")
    the_day = (START + dt.timedelta(days=day)).isoformat()
    result = merged.resolve_job_def("checks").execute_in_process(
        tags={
            "dagster/asset_partition_range_start": the_day,
            "dagster/asset_partition_range_end": the_day,
        },
        instance=instance,
        raise_on_error=False,
    )
    checks = check_results(result)
    assert checks[("crm_customers", "rerun_equality")] is False
    assert checks[("crm_customers", "conservation")] is False


def _documented(name: str) -> dict:
    """The YAML example of docs/landing.md declaring ``name``, as its attributes."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "landing.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        loaded = yaml.safe_load(block)
        if isinstance(loaded, dict) and loaded.get("attributes", {}).get("name") == name:
            return loaded["attributes"]
    raise AssertionError(f"docs/landing.md declares no {name}")


def test_the_documented_change_feed_declaration_runs_on_a_hand_written_export(tmp_path):
    source = declaration_from_mapping(_documented("crm_customers"), "docs")
    landing = tmp_path / "landing"
    days = {
        # A CDC export: inserts, an update, a delete, and a re-insert after a delete.
        "2024-03-01": "customer_id,segment,updated_at,op\n"
        "1,smb,2024-03-01T09:00:00Z,I\n2,smb,2024-03-01T09:05:00Z,I\n"
        "3,consumer,2024-03-01T10:00:00Z,I\n",
        "2024-03-02": "customer_id,segment,updated_at,op\n"
        "1,enterprise,2024-03-02T08:00:00Z,U\n2,,2024-03-02T08:30:00Z,D\n"
        "3,,2024-03-02T09:00:00Z,D\n",
        "2024-03-03": "customer_id,segment,updated_at,op\n3,smb,2024-03-03T07:00:00Z,I\n",
    }
    for day, text in days.items():
        folder = landing / "crm_customers" / f"date={day}"
        folder.mkdir(parents=True)
        (folder / "export.csv").write_text(text)
    defs, lake = declared_definitions([source], landing, tmp_path)
    alone = dg.define_asset_job("alone", selection=dg.AssetSelection.assets("crm_customers"))
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[alone])).resolve_job_def("alone")
    instance = dg.DagsterInstance.ephemeral()
    for day in ("2024-03-03", "2024-03-01", "2024-03-02", "2024-03-01"):  # out of order
        result = job.execute_in_process(partition_key=day, instance=instance)
        assert all(check_results(result).values()), check_results(result)
    stored = read_rows(lake.table("crm_customers").open()).to_pylist()
    assert {r[KEY]: r["segment"] for r in stored} == {1: "enterprise", 3: "smb"}
    assert OP not in stored[0]
