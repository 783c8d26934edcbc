"""The code location holds the YAML-declared TPC-H domain beside the shipped one."""

import datetime as dt

import dagster as dg

from idem_assets.definitions import defs

TPCH = ("tpch_orders", "tpch_lineitem", "tpch_customer")


def test_tpch_assets_checks_and_sensors_are_in_the_code_location():
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    for name in TPCH:
        node = graph.get(dg.AssetKey(name))
        assert node.group_name == "tpch", name
        partitions = node.partitions_def
        if name == "tpch_customer":
            assert partitions is None
        else:
            assert isinstance(partitions, dg.DailyPartitionsDefinition)
            assert partitions.start.date() == dt.date(1992, 1, 1)
        checks = {k.name for k in graph.asset_check_keys if k.asset_key == node.key}
        assert {
            "rerun_equality",
            "unique_natural_key",
            "conservation",
            "quarantine_share",
        } <= checks, name
    sensors = {s.name for s in repo.sensor_defs}
    assert {f"{name}_landing_sensor" for name in TPCH} <= sensors
    # The shipped domain is still there under its own names.
    assert {"orders", "customers"} <= {k.to_user_string() for k in graph.get_all_asset_keys()}


def test_tpch_tables_declare_their_strategy_keys_and_no_version_column():
    specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
    declared = {
        name: (
            specs[name].metadata.get("idem/strategy"),
            specs[name].metadata.get("idem/natural_key"),
            specs[name].metadata.get("idem/partition_column"),
            specs[name].metadata.get("idem/version_column"),
        )
        for name in TPCH
    }
    assert declared == {
        "tpch_orders": ("overwrite", ["o_orderkey"], "o_orderdate", None),
        "tpch_lineitem": ("overwrite", ["l_orderkey", "l_linenumber"], "l_shipdate", None),
        "tpch_customer": ("replace", ["c_custkey"], None, None),
    }
