"""The library layers import no Dagster: each is imported alone in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("landing", "lake", "checkpoint", "stream", "notify", "spark", "sources")
_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules
                        if name.split(".")[0] in ("dagster", "dagster_pyspark",
                                                  "dagster_deltalake", "dagster_shared"))))
"""


@pytest.mark.parametrize("layer", LAYERS)
def test_a_library_layer_imports_no_dagster(layer: str):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, f"idem_assets.{layer}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [], f"idem_assets.{layer} imports Dagster"


def test_the_probe_sees_dagster_where_it_is_imported():
    """The same probe on the Dagster side of Spark lists dagster: the test can fail."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "idem_assets.lib.spark"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dagster_pyspark" in json.loads(done.stdout)
