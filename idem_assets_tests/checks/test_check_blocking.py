"""Which checks block: a source's ``blocking`` applies to the checks that can fail with
ERROR; a check that can only warn (``value_rules`` of WARN rules only) never blocks, in its
spec and in every evaluation, and ``value_rules`` fails with the severity of the most severe
broken rule, so downstream assets run on a day that only warns."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg

from idem_assets.sources import LandingSource
from idem_assets_tests.harness import START, declared_definitions

FEED = dg.AssetKey("feed")
DOWNSTREAM = dg.AssetKey("feed_totals")
RULES = "value_rules"
WARN_RULE = "status_allowed"
ERROR_RULE = "amount_non_negative"
# Day 1 breaks the WARN rule only (a status outside the list), day 2 the ERROR rule only
# (a negative amount); every row of both days is loaded.
DAYS = {
    START: [(1, "paid", "5.00"), (2, "lost", "7.00")],
    START + dt.timedelta(days=1): [(3, "paid", "-1.00"), (4, "paid", "2.00")],
}


def _definitions(tmp_path: Path, error_rule: bool = True) -> dg.Definitions:
    """The declared source with blocking checks, and an asset computed from it; without
    ``error_rule``, the amount rule only warns."""
    severity = "error" if error_rule else "warn"
    source = LandingSource.model_validate(
        {
            "name": "feed",
            "first_day": START.isoformat(),
            "natural_key": ["id"],
            "partition_date": "day",
            "strategy": "overwrite",
            "checks": {"blocking": True},
            "columns": [
                {"name": "id", "type": "int64"},
                {"name": "status", "type": "string", "rules": [{"allowed": ["paid"]}]},
                {
                    "name": "amount",
                    "type": "decimal(18,2)",
                    "rules": [{"non_negative": True, "severity": severity}],
                },
                {"name": "day", "type": "date"},
            ],
        }
    )
    landing = tmp_path / "landing"
    for day, rows in DAYS.items():
        folder = landing / "feed" / f"date={day}"
        folder.mkdir(parents=True)
        lines = ["id,status,amount,day", *(f"{i},{s},{a},{day}" for i, s, a in rows)]
        (folder / f"feed-{day}.csv").write_text("\n".join(lines) + "\n")
    defs, _ = declared_definitions([source], landing, tmp_path)
    partitions = defs.resolve_assets_def(FEED).partitions_def

    @dg.asset(key=DOWNSTREAM, deps=[FEED], partitions_def=partitions)
    def feed_totals() -> None:
        """Stands for anything computed from feed: it runs only where feed's checks let it."""

    return dg.Definitions.merge(defs, dg.Definitions(assets=[feed_totals]))


def _run(defs: dg.Definitions, instance: dg.DagsterInstance, day: dt.date):
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        partition_key=day.isoformat(), instance=instance, raise_on_error=False
    )


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key == FEED}


def _materialized(result: dg.ExecuteInProcessResult) -> set[dg.AssetKey]:
    return {
        event.asset_key
        for event in result.get_asset_materialization_events()
        if event.asset_key is not None
    }


def test_value_rules_block_only_where_a_rule_can_fail_with_error(tmp_path):
    defs = _definitions(tmp_path)
    specs = {spec.name: spec for spec in defs.resolve_assets_def(FEED).check_specs}
    for name in ("conservation", "quarantine_share", RULES, "rerun_equality"):
        assert specs[name].blocking, name
    # The code location as the UI loads it says the same.
    graph = defs.get_repository_def().asset_graph
    assert graph.get_check_spec(dg.AssetCheckKey(FEED, RULES)).blocking
    # With WARN rules only, the check can only warn: never blocking.
    warn_only = _definitions(tmp_path / "warn", error_rule=False)
    specs = {spec.name: spec for spec in warn_only.resolve_assets_def(FEED).check_specs}
    assert not specs[RULES].blocking and specs["conservation"].blocking


def test_a_broken_warn_rule_warns_without_blocking_downstream(tmp_path):
    defs = _definitions(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    day = START
    result = _run(defs, instance, day)
    assert result.success
    assert _materialized(result) == {FEED, DOWNSTREAM}
    warned = _evaluations(result)[RULES]
    assert (warned.passed, warned.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert warned.metadata["rules_broken"].value == [WARN_RULE]
    assert warned.metadata["offending_rows"].value == 1
    # Rerun unchanged: the result is carried forward, still only a warning.
    again = _evaluations(_run(defs, instance, day))[RULES]
    assert again.metadata["carried_forward"].value is True
    assert (again.passed, again.severity) == (False, dg.AssetCheckSeverity.WARN)


def test_a_broken_error_rule_blocks_downstream(tmp_path):
    defs = _definitions(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    result = _run(defs, instance, START + dt.timedelta(days=1))
    assert not result.success
    error = result.get_step_failure_events()[0].step_failure_data.error
    assert error is not None and f"feed: {RULES}" in error.message
    # feed is written (the checks judge what was stored), the asset computed from it is not.
    assert _materialized(result) == {FEED}
    failed = _evaluations(result)[RULES]
    assert (failed.passed, failed.severity, failed.blocking) == (
        False,
        dg.AssetCheckSeverity.ERROR,
        True,
    )
    assert failed.metadata["rules_broken"].value == [ERROR_RULE]
