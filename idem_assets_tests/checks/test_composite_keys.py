"""Every check and every strategy treats the whole natural key, one column or several.

The rows share their first key column on purpose (an order id repeated per region and
line), so a check or a write that looked at the first column only would miscount.
"""

from __future__ import annotations

import dagster as dg
import pytest

from idem_assets.lake import read_rows
from idem_assets.resources import LakeResource
from idem_assets.sources import LandingSource
from idem_assets_tests.harness import START, declared_definitions, materialization_metadata

DAY = START.isoformat()
KEYS = {"one column": ["id"], "three columns": ["region", "id", "line"]}
# (region, id, line, qty, changed): ids repeat across regions and lines; the last row
# delivers a newer version of an earlier key.
ROWS = [
    ("eu", 1, 1, 5, "2024-03-01T08:00:00Z"),
    ("eu", 1, 2, 6, "2024-03-01T08:00:00Z"),
    ("us", 1, 1, 7, "2024-03-01T08:00:00Z"),
    ("us", 2, 1, 8, "2024-03-01T08:00:00Z"),
    ("eu", 1, 1, 9, "2024-03-01T09:00:00Z"),
]


def _project(tmp_path, key: list[str], strategy: str) -> tuple[dg.Definitions, LakeResource]:
    snapshot = strategy == "replace"
    declared = {
        "name": "feed",
        "natural_key": key,
        "version": "changed",
        "snapshot": snapshot,
        "columns": [
            {"name": "region", "type": "string"},
            {"name": "id", "type": "int64"},
            {"name": "line", "type": "int32"},
            {"name": "qty", "type": "int32"},
            {"name": "changed", "type": "timestamp"},
            *([] if snapshot else [{"name": "day", "type": "date"}]),
        ],
        "strategy": strategy,
    }
    if not snapshot:
        declared["first_day"] = DAY
        if strategy == "overwrite":
            declared["partition_date"] = "day"
    source = LandingSource.model_validate(declared)
    landing = tmp_path / "landing"
    folder = landing / "feed" / ("" if snapshot else f"date={DAY}")
    folder.mkdir(parents=True)
    header = "region,id,line,qty,changed" + ("" if snapshot else ",day")
    lines = [",".join(map(str, r)) + ("" if snapshot else f",{DAY}") for r in ROWS]
    (folder / "feed-2024-03-01.csv").write_text("\n".join([header, *lines]) + "\n")
    return declared_definitions([source], landing, tmp_path)


def _materialize(defs: dg.Definitions, instance, snapshot: bool) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        partition_key=None if snapshot else DAY, instance=instance, raise_on_error=False
    )


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, tuple[bool, dict]]:
    return {
        e.check_name: (e.passed, {k: getattr(v, "value", v) for k, v in e.metadata.items()})
        for e in result.get_asset_check_evaluations()
    }


@pytest.mark.parametrize("strategy", ["overwrite", "merge", "replace"])
@pytest.mark.parametrize("width", sorted(KEYS))
def test_every_check_and_strategy_counts_the_whole_key(tmp_path, width, strategy):
    key = KEYS[width]
    defs, lake = _project(tmp_path, key, strategy)
    instance = dg.DagsterInstance.ephemeral()
    first = _materialize(defs, instance, strategy == "replace")
    assert first.success
    stored = read_rows(lake.table("feed").open()).to_pylist()
    # One row per whole key, the newest version winning.
    expected = {}
    for region, id_, line, qty, _changed in ROWS:
        row = {"region": region, "id": id_, "line": line, "qty": qty}
        expected[tuple(row[c] for c in key)] = row
    got = {
        tuple(r[c] for c in key): {c: r[c] for c in ("region", "id", "line", "qty")} for r in stored
    }
    assert got == expected
    checks = _checks(first)
    assert checks and all(passed for passed, _ in checks.values()), checks
    if "conservation" in checks:
        meta = checks["conservation"][1]
        assert (meta["loaded"], meta["duplicates_dropped"], meta["unaccounted"]) == (
            len(expected),
            len(ROWS) - len(expected),
            0,
        )
    again = _materialize(defs, instance, strategy == "replace")
    assert again.success and materialization_metadata(again)["feed"]["committed"] is False
    assert all(passed for passed, _ in _checks(again).values())
    assert lake.table("feed").open().version() == 0
