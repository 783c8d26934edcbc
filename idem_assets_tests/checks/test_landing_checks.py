"""Landing checks: a day that loads nothing is red, a lossy day amber, value rules counted."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from idem_assets.lake import read_rows
from idem_assets.resources import LakeResource
from idem_assets.sources import Column, DailySource, RangeRule
from idem_assets_tests.harness import (
    START,
    check_results,
    declared_definitions,
    materialization_metadata,
)

DAY = START.isoformat()
HEADER = "order_id,customer_id,amount,status,order_date,updated_at"


def _evaluations(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, object]:
    return {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if e.asset_key == dg.AssetKey(asset)
    }


def _meta(evaluation) -> dict:
    return {k: getattr(v, "value", v) for k, v in evaluation.metadata.items()}


def _replace_day(project, rows: list[str]) -> None:
    folder = project.landing / "orders" / f"date={DAY}"
    for path in folder.iterdir():
        path.unlink()
    (folder / "export.csv").write_text("".join(f"{r}\n" for r in (HEADER, *rows)))


def test_a_day_whose_rows_are_all_quarantined_is_never_all_green(project):
    # Every timestamp in the spelling nobody declared: nothing can be stored.
    _replace_day(project, [f"{i},7,1.00,paid,{DAY},14/03/2024 08:54" for i in range(1, 41)])
    result = project.run_days(DAY, assets=["orders"])
    checks = _evaluations(result, "orders")
    share = checks["quarantine_share"]
    assert not share.passed and share.severity == dg.AssetCheckSeverity.ERROR
    assert share.description.startswith(
        f"{DAY}: every one of 40 raw row(s) was quarantined, nothing loaded; top reason: "
        "updated_at: value '…' is not an ISO-8601 timestamp"
    )
    meta = _meta(share)
    assert meta["days_loading_nothing"] == 1 and meta["quarantined"] == 40
    assert list(meta["top_reasons"].values()) == [40]
    # The proofs over the (empty) slice hold; the share check is what turns red.
    assert checks["rerun_equality"].passed and checks["conservation"].passed
    assert materialization_metadata(result)["orders"]["quarantined_rows"] == 40


def test_a_day_above_the_threshold_warns_with_its_top_reasons(project):
    good = [f"{i},7,1.00,paid,{DAY},{DAY}T10:00:00Z" for i in range(1, 96)]
    bad = [f'{i},7,"1,5",paid,{DAY},{DAY}T10:00:00Z' for i in range(96, 101)]
    _replace_day(project, good + bad)
    result = project.run_days(DAY, assets=["orders"])
    share = _evaluations(result, "orders")["quarantine_share"]
    assert not share.passed and share.severity == dg.AssetCheckSeverity.WARN
    assert share.description.startswith(f"{DAY}: 5.0% of raw rows quarantined (threshold 1.0%)")
    reasons = _meta(share)["top_reasons"]
    assert reasons == {
        "amount: value '…' is not a decimal number like 12.34 (if the source "
        "writes decimal commas or thousands separators, declare them, e.g. "
        "numbers: {decimal: ',', thousands: '.'})": 5
    }
    assert check_results(result)[("orders", "quarantine_share")]  # a warning, not a failure


def test_a_warn_value_rule_loads_the_rows_and_reports_counts_and_samples(project):
    result = project.run_days(DAY, assets=["orders"])
    rules = _evaluations(result, "orders")["value_rules"]
    assert not rules.passed and rules.severity == dg.AssetCheckSeverity.WARN
    meta = _meta(rules)
    assert meta["rules_broken"] == ["status_allowed"] and meta["rules_checked"] == 2
    [status, amount] = meta["rules"]  # the broken rule first
    assert (status["rule"], status["severity"], status["offending_rows"]) == (
        "status_allowed",
        "warn",
        1,
    )
    assert status["top_values"] == [{"value": "lost", "rows": 1}]
    [sample] = status["sample"]
    assert sample["status"] == "lost"
    assert (amount["rule"], amount["offending_rows"]) == ("amount_non_negative", 0)
    assert "sample" not in amount  # nothing to show for a rule every row keeps
    stored = {r["order_id"]: r["status"] for r in project.table_rows("orders")}
    assert stored[sample["order_id"]] == "lost"  # loaded, not refused
    assert rules.description == (
        f"1 of 2 rule(s) broken in {meta['rows_checked']:,} row(s): status_allowed (1 rows)"
    )
    assert status["asserts"] == (
        "status is one of placed, paid, shipped, delivered, cancelled, refunded"
    )


def _feed(tmp_path: Path, severity: str, *more: Column) -> tuple[dg.Definitions, LakeResource]:
    source = DailySource(
        name="feed",
        first_day=START,
        natural_key=("id",),
        partition_date="day",
        columns=(
            Column(name="id", type="int64"),
            Column(name="day", type="date"),
            Column(name="qty", type="int32", rules=(RangeRule(min=1, max=50, severity=severity),)),
            *more,
        ),
    )
    landing = tmp_path / "landing"
    folder = landing / "feed" / f"date={DAY}"
    folder.mkdir(parents=True)
    (folder / "a.csv").write_text(f"id,day,qty\n1,{DAY},5\n2,{DAY},70\n3,{DAY},0\n")
    return declared_definitions([source], landing, tmp_path)


def _materialize(defs: dg.Definitions, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(partition_key=DAY, instance=instance, raise_on_error=False)


def test_value_rules_fail_with_the_most_severe_broken_rule(tmp_path):
    """One WARN and one ERROR rule: broken WARN alone warns, a broken ERROR rule errs."""
    size = Column(name="size", type="int32", rules=(RangeRule(max=9, severity="error"),))
    defs, _ = _feed(tmp_path, "warn", size)
    csv = tmp_path / "landing" / "feed" / f"date={DAY}" / "a.csv"
    instance = dg.DagsterInstance.ephemeral()
    csv.write_text(f"id,day,qty,size\n1,{DAY},5,1\n2,{DAY},70,2\n")
    warned = _evaluations(_materialize(defs, instance), "feed")["value_rules"]
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    assert _meta(warned)["rules_broken"] == ["qty_range"]
    csv.write_text(f"id,day,qty,size\n1,{DAY},5,1\n2,{DAY},70,12\n")
    erred = _evaluations(_materialize(defs, instance), "feed")["value_rules"]
    assert not erred.passed and erred.severity == dg.AssetCheckSeverity.ERROR
    assert _meta(erred)["rules_broken"] == ["qty_range", "size_range"]
    assert _meta(erred)["offending_rows"] == 2  # one row each
    csv.write_text(f"id,day,qty,size\n1,{DAY},5,1\n2,{DAY},7,2\n")
    clean = _evaluations(_materialize(defs, instance), "feed")["value_rules"]
    assert clean.passed and clean.description == "2 row(s) satisfy every rule (2)"


def test_a_python_declaration_yields_asset_checks_and_sensor(tmp_path):
    defs, lake = _feed(tmp_path, "error")
    assert {s.name for s in defs.sensors} == {"feed_landing_sensor"}
    instance = dg.DagsterInstance.ephemeral()
    first = _materialize(defs, instance)
    qty = _evaluations(first, "feed")["value_rules"]
    assert not qty.passed and qty.severity == dg.AssetCheckSeverity.ERROR
    assert _meta(qty)["offending_rows"] == 2 and qty.description == (
        "1 of 1 rule(s) broken in 3 row(s): qty_range (2 rows)"
    )
    assert _meta(qty)["rules"][0]["asserts"] == "1 <= qty <= 50"
    again = _materialize(defs, instance)
    assert materialization_metadata(again)["feed"]["committed"] is False
    assert lake.table("feed").open().version() == 0


def test_a_quarantine_rule_keeps_rows_out_and_the_check_then_passes(tmp_path):
    defs, lake = _feed(tmp_path, "quarantine")
    result = _materialize(defs, dg.DagsterInstance.ephemeral())
    assert read_rows(lake.table("feed").open()).column("id").to_pylist() == [1]
    checks = _evaluations(result, "feed")
    # The reader applies the rule, so there is no value-rule check for it; the share check
    # sees two of three rows refused.
    assert "value_rules" not in checks
    quarantine = read_rows(lake.table("quarantine").open()).to_pylist()
    assert sorted(q["reason"] for q in quarantine) == [
        "qty: 0 is outside the range (1 <= qty <= 50)",
        "qty: 70 is outside the range (1 <= qty <= 50)",
    ]
    share = checks["quarantine_share"]
    assert not share.passed and share.severity == dg.AssetCheckSeverity.WARN
    assert checks["conservation"].passed
