"""A declared source keeping a change data feed, and a downstream asset taking "the changes
since I last ran": days loaded in random orders and again, the consumer run after each load
and sometimes stopped before it acknowledges; its change log holds every change once and
rebuilds the source table."""

import datetime as dt
import random

import dagster as dg
from deltalake import DeltaTable

from idem_assets.lake import read_rows
from idem_assets.lib import append_changes, changes_metadata, consume_changes
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sources.load import declaration_from_mapping
from idem_assets_tests.harness import check_results, declared_definitions
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, change_days, reference
from idem_assets_tests.sources.test_delete_marker import DECLARED, START, _lay_out

FEEDING = {**DECLARED, "change_data_feed": True}


class Stop(dg.Config):
    """Stop after writing, before acknowledging (a crash in the worst place)."""

    before_acknowledging: bool = False


@dg.asset(deps=["crm_customers"])
def customer_changes(
    config: Stop, lake: LakeResource, checkpoint: CheckpointResource
) -> dg.MaterializeResult:
    with consume_changes(lake, checkpoint, "crm_customers", "customer_changes") as changes:
        written = append_changes(lake.table("customer_changes"), changes, "customer_changes")
        if config.before_acknowledging:
            raise RuntimeError("stopped before acknowledging")
    return dg.MaterializeResult(metadata=changes_metadata(changes, written))


def _rebuilt(changes: list[dict]) -> dict[int, dict]:
    """The table the change log describes, applied in commit order."""
    table: dict[int, dict] = {}
    for row in sorted(changes, key=lambda r: (r["_commit_version"], r["_change_type"] != "delete")):
        data = {k: v for k, v in row.items() if not k.startswith("_")}
        if row["_change_type"] in ("insert", "update_postimage"):
            table[row[KEY]] = data
        elif row["_change_type"] == "delete":
            table.pop(row[KEY], None)
    return table


def test_the_consumer_takes_every_change_once_in_any_order_of_loads_and_stops(tmp_path):
    changes = change_days(31)
    landing = tmp_path / "landing"
    _lay_out(landing, changes)
    source = declaration_from_mapping(FEEDING, "test")
    defs, lake = declared_definitions([source], landing, tmp_path)
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[customer_changes]))
    load = dg.define_asset_job("load", selection=dg.AssetSelection.assets("crm_customers"))
    take = dg.define_asset_job("take", selection=dg.AssetSelection.assets("customer_changes"))
    defs = dg.Definitions.merge(defs, dg.Definitions(jobs=[load, take]))
    instance = dg.DagsterInstance.ephemeral()
    rng = random.Random(31)
    order = rng.sample(range(DAYS), DAYS) + rng.sample(range(DAYS), 6)  # then reloads
    stops = quiet = 0
    for index in order:
        key = (START + dt.timedelta(days=index)).isoformat()
        loaded = defs.resolve_job_def("load").execute_in_process(
            partition_key=key, instance=instance
        )
        assert all(check_results(loaded).values())
        stop = rng.random() < 0.3
        config = {"ops": {"customer_changes": {"config": {"before_acknowledging": stop}}}}
        taken = defs.resolve_job_def("take").execute_in_process(
            run_config=config, instance=instance, raise_on_error=False
        )
        assert taken.success != stop
        stops += stop
        if taken.success:
            metadata = taken.get_asset_materialization_events()[0].materialization.metadata
            quiet += metadata["change_rows"].value == 0
    done = defs.resolve_job_def("take").execute_in_process(instance=instance)
    assert done.success and stops and quiet  # some stops, and reloads that changed nothing
    source_rows = read_rows(lake.table("crm_customers").open()).to_pylist()
    assert {r[KEY]: r for r in source_rows} == reference(changes)
    assert DeltaTable(lake.table("crm_customers").uri).metadata().configuration == {
        "delta.enableChangeDataFeed": "true"
    }
    log = read_rows(lake.table("customer_changes").open()).to_pylist()
    once = {(r["_commit_version"], r[KEY], r["_change_type"]) for r in log}
    assert len(once) == len(log)  # no change taken twice, despite the stops
    assert _rebuilt(log) == {r[KEY]: r for r in source_rows}
