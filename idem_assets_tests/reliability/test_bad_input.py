"""Each malformed landing input ends as the documented policy says, and no row is lost."""

from __future__ import annotations

import json

import dagster as dg
import pyarrow.compute as pc
import pytest

from idem_assets.lake import fingerprint, read_rows
from idem_assets_tests.harness import Project, materialization_metadata
from idem_assets_tests.reliability.corpus import CASES, DAY, GOOD_EVENTS, GOOD_FILES, GOOD_ORDERS
from idem_assets_tests.reliability.runner import failures
from idem_assets_tests.reliability.world import NATURAL_KEYS, project_at, record_row

KEY = DAY.isoformat()
GOOD_KEYS = {
    "orders": {r["order_id"] for r in GOOD_ORDERS},
    "events": {r["event_id"] for r in GOOD_EVENTS},
}


def state(project: Project, table: str) -> tuple[int, str] | None:
    """(Delta version, fingerprint) of a table, None when it does not exist."""
    opened = project.lake.table(table).open()
    return None if opened is None else (opened.version(), str(fingerprint(read_rows(opened))))


def quarantined(project: Project, source: str) -> dict[tuple[str, int], str]:
    """(source file, row number) -> reason of the source's quarantine rows for the day."""
    opened = project.lake.table("quarantine").open()
    if opened is None:
        return {}
    rows = read_rows(opened)
    rows = rows.filter(pc.equal(rows.column("source"), source))
    return {(r["source_file"], r["row_number"]): r["reason"] for r in rows.to_pylist()}


def conservation(result) -> dict:
    """The conservation check's metadata of a run."""
    evaluation = next(
        e for e in result.get_asset_check_evaluations() if e.check_name == "conservation"
    )
    assert evaluation.passed, evaluation.metadata
    return {k: v.value for k, v in evaluation.metadata.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_follows_the_policy(case, tmp_path):
    folder = tmp_path / "landing" / case.source / f"date={KEY}"
    folder.mkdir(parents=True)
    good_name, good_bytes = GOOD_FILES[case.source]
    (folder / good_name).write_bytes(good_bytes)
    project = project_at(tmp_path, tmp_path / "landing")
    assert project.run_days(KEY, assets=[case.source]).success
    before = {t: state(project, t) for t in (case.source, "quarantine")}
    for name, data in case.files.items():
        (folder / name).write_bytes(data)

    result = project.run_days(KEY, assets=[case.source])
    relpaths = {f"{case.source}/date={KEY}/{name}" for name in case.files}
    if case.outcome == "error":
        assert not result.success
        errors = " ".join(failures(result))
        assert any(p in errors for p in relpaths), errors
        assert case.error.lower() in errors.lower(), errors
        untouched = {t: state(project, t) for t in before} == before
        record_row(
            "bad_input",
            case.name,
            runs=2,
            faults=case.problem,
            equal=untouched,
            duplicates=0,
            lost=0,
            outcome="error, tables untouched",
            error=errors.rsplit(" <- ", 1)[-1][:200],
        )
        assert untouched
        return

    assert result.success, failures(result)
    checks = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }
    # A warning of value_rules names the rules broken: those are what a case warns about.
    warned = {
        name
        for (_, check), e in checks.items()
        if not e.passed and e.severity == dg.AssetCheckSeverity.WARN
        for name in (
            e.metadata["rules_broken"].value if check == "value_rules" else [check]  # type: ignore[union-attr]
        )
    }
    failed = {
        name
        for (_, name), e in checks.items()
        if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    }
    assert checks and not failed, failed
    share = {"quarantine_share"} if case.quarantined else set()
    assert warned == {case.warns} - {None} | share, warned
    accounting = conservation(result)
    table = read_rows(project.lake.table(case.source).open())
    keys = table.column(NATURAL_KEYS[case.source][0]).to_pylist()
    stored = quarantined(project, case.source)
    expected = {
        (f"{case.source}/date={KEY}/{name}", row): text
        for (name, row), text in case.quarantined.items()
    }
    metadata = json.dumps(materialization_metadata(result)[case.source], default=str)
    by_key = {r[NATURAL_KEYS[case.source][0]]: r for r in table.to_pylist()}
    values = {k: {c: by_key.get(k, {}).get(c) for c in cols} for k, cols in case.values.items()}
    equal = (
        set(keys) == GOOD_KEYS[case.source] | set(case.loads)
        and set(stored) == set(expected)
        and all(expected[k] in stored[k] for k in expected)
        and case.reported in metadata
        and values == case.values
    )
    record_row(
        "bad_input",
        case.name,
        runs=2,
        faults=case.problem,
        equal=equal,
        duplicates=len(keys) - len(set(keys)),
        lost=accounting["unaccounted"],
        outcome=f"{len(stored)} quarantined, {len(set(keys))} loaded",
        reasons=sorted(set(stored.values()))[:3],
    )
    assert set(keys) == GOOD_KEYS[case.source] | set(case.loads)
    assert len(keys) == len(set(keys))
    assert set(stored) == set(expected), stored
    for row, text in expected.items():
        assert text in stored[row], (row, stored[row])
    assert case.reported in metadata, metadata
    assert values == case.values
    assert accounting["quarantined"] == len(expected) and accounting["unaccounted"] == 0
