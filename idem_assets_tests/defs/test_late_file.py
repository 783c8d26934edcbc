"""A late file landing on an old date changes only that partition."""

import datetime as dt

from deltalake import DeltaTable

from idem_assets.sample.generator import write_late_orders
from idem_assets_tests.harness import day_keys, materialization_metadata, new_project


def _files_by_day(project):
    actions = DeltaTable(project.lake.table("orders").uri).get_add_actions(flatten=True)
    days = actions.column("partition.order_date").to_pylist()
    paths = actions.column("path").to_pylist()
    out: dict[str, set[str]] = {}
    for d, p in zip(days, paths, strict=True):
        out.setdefault(str(d), set()).add(p)
    return out


def test_late_file_rewrites_only_its_day(tmp_path):
    project = new_project(tmp_path, days=4)
    keys = day_keys(4)
    for key in keys:
        assert project.run_days(key).success
    before_files = _files_by_day(project)
    before_rows = {r["order_id"]: r for r in project.table_rows("orders")}
    version = project.version("orders")

    write_late_orders(project.landing, dt.date.fromisoformat(keys[1]), seed=99, n=5)
    for key in keys:  # rerun everything: only day 2 may change
        result = project.run_days(key)
        assert result.success
        committed = materialization_metadata(result)["orders"]["committed"]
        assert committed is (key == keys[1]), key

    after_files = _files_by_day(project)
    assert project.version("orders") == version + 1
    for key in keys:
        if key == keys[1]:
            assert after_files[key] != before_files[key]
        else:
            assert after_files[key] == before_files[key], f"{key} was rewritten"
    after_rows = {r["order_id"]: r for r in project.table_rows("orders")}
    changed = {k for k in after_rows if after_rows[k] != before_rows.get(k)}
    assert changed and all(str(after_rows[k]["order_date"]) == keys[1] for k in changed)
    assert len(after_rows) == len(before_rows)
