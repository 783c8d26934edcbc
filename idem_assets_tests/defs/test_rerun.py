"""Every asset materialized twice: same fingerprint, same rows, no new commit, checks pass."""

import polars as pl
import pytest

from idem_assets_tests.harness import ALL_TABLES, check_results, materialization_metadata


def _assert_unique(project, table, key):
    frame = pl.from_dicts(project.table_rows(table))
    assert frame.height > 0
    assert frame.select(key).is_duplicated().sum() == 0, f"{table} has duplicate {key}"


@pytest.mark.parametrize("partition", ["2024-03-01", "2024-03-03"])
def test_daily_assets_twice_give_the_same_state(project, partition):
    first = project.run_days(partition)
    assert first.success
    tables_after_first = {
        t: project.table_fingerprint(t) for t in ("orders", "customers", "events", "daily_sales")
    }
    versions = {t: project.version(t) for t in tables_after_first}
    second = project.run_days(partition)
    assert second.success
    md1, md2 = materialization_metadata(first), materialization_metadata(second)
    for asset in ("orders", "customers", "events", "daily_sales"):
        assert md1[asset]["fingerprint"] == md2[asset]["fingerprint"], asset
        assert md1[asset]["dagster/row_count"] == md2[asset]["dagster/row_count"] > 0
        assert md1[asset]["committed"] is True
        assert md2[asset]["committed"] is False, f"{asset} rerun committed a new version"
        assert project.table_fingerprint(asset) == tables_after_first[asset]
        assert project.version(asset) == versions[asset]
    for asset in ("orders", "customers", "events"):  # read from landing files
        # The rerun did not read the unchanged files, and reports the figures they gave.
        for figure in ("landing_files", "raw_rows", "valid_rows", "quarantined_rows", "files"):
            assert md2[asset][figure] == md1[asset][figure], (asset, figure)
        assert md1[asset]["raw_rows"] > 0
    checks = {**check_results(first), **check_results(second)}
    assert checks and all(checks.values()), checks
    assert ("orders", "rerun_equality") in checks
    assert ("daily_sales", "reconciles_with_orders") in checks
    _assert_unique(project, "orders", "order_id")
    _assert_unique(project, "events", "event_id")
    _assert_unique(project, "customers", "customer_id")


def test_catalog_twice_gives_the_same_state(project):
    first, second = project.run_catalog(), project.run_catalog()
    assert first.success and second.success
    md1, md2 = (materialization_metadata(r)["product_catalog"] for r in (first, second))
    assert md1["fingerprint"] == md2["fingerprint"]
    assert (md1["committed"], md2["committed"]) == (True, False)
    assert project.version("product_catalog") == 0
    assert all(check_results(second).values())
    _assert_unique(project, "product_catalog", "product_id")


def test_n_reruns_converge_to_one_clean_run(project, tmp_path):
    for _ in range(3):
        assert project.run_days("2024-03-02").success
        assert project.run_catalog().success
    from idem_assets_tests.harness import new_project

    clean = new_project(tmp_path / "clean", days=4)
    assert clean.run_days("2024-03-02").success and clean.run_catalog().success
    for table in ALL_TABLES:
        assert project.table_fingerprint(table) == clean.table_fingerprint(table), table
