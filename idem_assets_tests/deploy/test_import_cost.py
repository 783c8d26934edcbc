"""Importing the code location leaves out what only a run needs (polars, psycopg, pyspark).

Every process that imports the code location pays for its imports before doing anything:
the code server, each run worker, ``dg`` commands. These tests check what is imported, in
a fresh interpreter, not how long it takes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from idem_assets.landing.rules import anchored, pattern_problem

ROOT = Path(__file__).resolve().parents[2]
# Needed only when a run reads or writes (polars), opens a PostgreSQL store (psycopg) or
# selects the Spark engine (pyspark, dagster_pyspark).
DEFERRED = ("polars", "psycopg", "pyspark", "dagster_pyspark")

_PROBE = f"""
import json, sys
import idem_assets.definitions as location
graph = location.defs.resolve_asset_graph()
loaded = [name for name in {DEFERRED!r} if name in sys.modules]
import pyarrow as pa
from idem_assets.lake.frames import to_polars
frame = to_polars(pa.table({{"n": [1, 2]}}))
print(json.dumps({{
    "loaded": loaded,
    "assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
    "checks": sorted(f"{{key.asset_key.to_user_string()}}:{{key.name}}"
                     for key in graph.asset_check_keys),
    "first_use": [type(frame).__module__.split(".")[0], "polars" in sys.modules],
}}))
"""


@pytest.fixture(scope="module")
def probe() -> dict[str, list[str]]:
    """What a fresh interpreter has imported once it has imported the code location."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_code_location_imports_without_what_only_runs_need(probe):
    assert probe["loaded"] == []


def test_the_code_location_still_holds_its_assets_and_checks(probe):
    assert set(probe["assets"]) >= {
        "orders",
        "customers",
        "events",
        "product_catalog",
        "daily_sales",
        "notifications",
        "events_stream",
        "tpch_customer",
        "tpch_orders",
        "tpch_lineitem",
    }
    assert {
        "orders:rerun_equality",
        "orders:unique_natural_key",
        "daily_sales:reconciles_with_orders",
        "notifications:no_dead_letters",
    } <= set(probe["checks"])


def test_a_deferred_module_is_imported_on_first_use(probe):
    assert probe["first_use"] == ["polars", True]


@pytest.mark.parametrize(
    "pattern",
    [
        r"Customer#\d{9}",
        r"\d{2}-\d{3}-\d{3}-\d{4}",
        r"(?i)[a-z_]+",
        r"\p{L}+",
        r"x*+",
        r"(?<=x)y",
        r"(?!x)y",
        r"(a)\1",
        r"\Z",
        r"(",
        r"a{2,1}",
        r"(?:a{1000}){1000}",
    ],
)
def test_patterns_are_judged_as_polars_judges_them(pattern):
    """Declared patterns are checked without polars; the verdict must be polars' own."""
    try:
        re.compile(pattern)
        pl.Series([""], dtype=pl.String).str.contains(anchored(pattern))
        expected = None
    except (re.error, pl.exceptions.PolarsError) as exc:
        expected = str(exc).strip().splitlines()[0]
    problem = pattern_problem(pattern)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and problem.endswith(f": {expected}")
