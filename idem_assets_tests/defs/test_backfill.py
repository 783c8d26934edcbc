"""A single-run backfill of a range equals per-partition runs, in any order."""

from idem_assets_tests.harness import DAILY_TABLES, check_results, day_keys, new_project


def test_range_in_one_run_equals_per_partition_runs_in_any_order(tmp_path):
    keys = day_keys(4)
    single = new_project(tmp_path / "single", days=4)
    forward = new_project(tmp_path / "forward", days=4)
    reverse = new_project(tmp_path / "reverse", days=4)

    result = single.run_days(keys[0], keys[-1])
    assert result.success
    assert all(check_results(result).values())
    for key in keys:
        assert forward.run_days(key).success
    for key in reversed(keys):
        assert reverse.run_days(key).success

    for table in DAILY_TABLES:
        expected = single.table_fingerprint(table)
        assert forward.table_fingerprint(table) == expected, table
        assert reverse.table_fingerprint(table) == expected, table
    # One commit per table for the whole range (plus nothing else).
    assert single.version("orders") == 0
    assert single.version("daily_sales") == 0


def test_rerunning_the_range_commits_nothing(tmp_path):
    project = new_project(tmp_path, days=3)
    keys = day_keys(3)
    assert project.run_days(keys[0], keys[-1]).success
    versions = {t: project.version(t) for t in DAILY_TABLES}
    again = project.run_days(keys[0], keys[-1])
    assert again.success and all(check_results(again).values())
    assert {t: project.version(t) for t in DAILY_TABLES} == versions
