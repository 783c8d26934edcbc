"""The code location holds the YAML-declared TPC-H domain beside the shipped one."""

import datetime as dt
import os

import dagster as dg
import pytest

from idem_assets.definitions import build_definitions, defs
from idem_assets.lib.resources import default_resources

TPCH = ("tpch_orders", "tpch_lineitem", "tpch_customer")
TPCH_DAILY = ("tpch_orders", "tpch_lineitem")


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


def daily_partitions_of(definitions: dg.Definitions) -> dict[str, dg.PartitionsDefinition]:
    """The partitions of the daily TPC-H assets in ``definitions``."""
    graph = definitions.get_repository_def().asset_graph
    found = {name: graph.get(dg.AssetKey(name)).partitions_def for name in TPCH_DAILY}
    assert all(p is not None for p in found.values()), found
    return found  # type: ignore[return-value]


def assert_days(definitions: dg.Definitions, last: str, days: int) -> None:
    partitions = daily_partitions_of(definitions)
    # One definition for both: they run as one single-run backfill (make demo does).
    assert partitions["tpch_orders"] == partitions["tpch_lineitem"]
    keys = partitions["tpch_orders"].get_partition_keys()
    assert (keys[0], keys[-1], len(keys)) == ("1992-01-01", last, days)


@pytest.mark.skipif(
    "IDEM_TPCH_LAST_DAY" in os.environ, reason="the code location was loaded with it set"
)
def test_tpch_partitions_are_the_31_days_make_run_lays_out():
    """The backfill the README names, 1992-01-01...1992-01-31, is every partition."""
    assert_days(defs, "1992-01-31", 31)


def test_tpch_partitions_follow_idem_tpch_last_day(monkeypatch):
    """The code location loaded again, as `make run` loads it with the variable exported."""

    def loaded() -> dg.Definitions:
        return build_definitions(default_resources())

    monkeypatch.delenv("IDEM_TPCH_LAST_DAY", raising=False)
    assert_days(loaded(), "1992-01-31", 31)
    # What `make run TPCH_DAYS=2406` exports: the whole history of orders.
    monkeypatch.setenv("IDEM_TPCH_LAST_DAY", "1998-08-02")
    assert_days(loaded(), "1998-08-02", 2406)
    # An empty variable is unset (the default applies).
    monkeypatch.setenv("IDEM_TPCH_LAST_DAY", "")
    assert_days(loaded(), "1992-01-31", 31)
