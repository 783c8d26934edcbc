"""Days with nothing to store: a rerun of an unchanged empty day commits nothing.

A single-run range writes days that landed nothing and a day whose every row is refused;
each is then rerun on its own, three times, and the range once more. No table (nor the
quarantine) may gain a version, whatever window the day was last written in, and the
refused day must not look healthy.
"""

from __future__ import annotations

import pytest

from idem_assets_tests.harness import check_results, day_keys, materialization_metadata, new_project

ASSETS = ["orders", "customers", "events"]
TABLES = (*ASSETS, "quarantine")
DAYS = day_keys(4)
EMPTY, REFUSED = DAYS[1], DAYS[2]
ORDER_COLUMNS = "order_id,customer_id,amount,status,order_date,updated_at"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Four days; nothing landed for EMPTY, only unreadable orders for REFUSED."""
    project = new_project(tmp_path_factory.mktemp("empty_days"), days=4)
    for path in list(project.landing.rglob("*")):
        if path.is_file() and EMPTY in path.parent.name and path.parts[-3] in ("orders", "events"):
            path.unlink()
    folder = project.landing / "orders" / f"date={REFUSED}"
    for path in folder.iterdir():
        path.unlink()
    (folder / "part-000.csv").write_text(
        f"{ORDER_COLUMNS}\n"
        + "".join(f"A-{i},1,1.00,paid,{REFUSED},{REFUSED}T10:00:00Z\n" for i in range(5))
    )
    ranged = project.run_days(DAYS[0], DAYS[-1], assets=ASSETS)
    stored = materialization_metadata(ranged)
    assert all(stored[asset]["committed"] for asset in ASSETS), stored
    return project


def _versions(project) -> dict[str, int]:
    return {table: project.version(table) for table in TABLES}


def test_the_range_stored_nothing_for_the_empty_day_and_quarantined_the_refused_one(project):
    orders = {str(row["order_date"]) for row in project.table_rows("orders")}
    assert EMPTY not in orders and REFUSED not in orders and DAYS[0] in orders
    for source in ("orders", "events"):
        assert not list((project.landing / source).glob(f"date={EMPTY}/*")), source
    refused = [
        row
        for row in project.table_rows("quarantine")
        if row["source"] == "orders" and str(row["partition_date"]) == REFUSED
    ]
    assert len(refused) == 5 and all("order_id" in row["reason"] for row in refused)


@pytest.mark.parametrize("day", [EMPTY, REFUSED, DAYS[0]])
def test_rerunning_a_day_alone_commits_nothing(project, day):
    before = _versions(project)
    for _ in range(3):
        result = project.run_days(day, assets=ASSETS)
        metadata = materialization_metadata(result)
        for asset in ASSETS:
            assert metadata[asset]["committed"] is False, (asset, day, metadata[asset])
        assert _versions(project) == before, day


def test_rerunning_the_range_commits_nothing(project):
    before = _versions(project)
    metadata = materialization_metadata(project.run_days(DAYS[0], DAYS[-1], assets=ASSETS))
    assert {asset: metadata[asset]["committed"] for asset in ASSETS} == dict.fromkeys(ASSETS, False)
    assert _versions(project) == before


def test_a_day_whose_rows_were_all_refused_fails_a_check_that_says_why(project):
    result = project.run_days(REFUSED, assets=["orders"])
    checks = check_results(result)
    assert checks[("orders", "quarantine_share")] is False
    evaluation = next(
        e for e in result.get_asset_check_evaluations() if e.check_name == "quarantine_share"
    )
    assert evaluation.severity.value == "ERROR"
    assert evaluation.metadata["quarantined"].value == 5
    assert "every one of 5 raw row(s) was quarantined, nothing loaded" in evaluation.description
    assert "order_id" in evaluation.description  # the top reason
