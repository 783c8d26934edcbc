"""The library layers import no Dagster: each is imported alone in a fresh interpreter."""

from __future__ import annotations

import json

import pytest

from idem_assets_tests.processes import run_python

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
    done = run_python("-c", _PROBE, f"idem_assets.{layer}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [], f"idem_assets.{layer} imports Dagster"


# What each layer may not load: the Dagster side, and the layers above it.
_ABOVE = (
    "idem_assets.io_manager",
    "idem_assets.lib",
    "idem_assets.defs",
    "idem_assets.resources",
    "idem_assets.definitions",
)
_FORBIDDEN = {
    "lake": (
        *_ABOVE,
        "idem_assets.landing",
        "idem_assets.sources",
        "idem_assets.stream",
        "idem_assets.spark",
        "idem_assets.checkpoint",
    ),
    "checkpoint": (*_ABOVE, "idem_assets.lake", "idem_assets.landing", "idem_assets.stream"),
    "landing": (*_ABOVE, "idem_assets.sources", "idem_assets.stream", "idem_assets.spark"),
    "sources": (*_ABOVE, "idem_assets.stream", "idem_assets.spark"),
    "stream": (*_ABOVE, "idem_assets.spark"),
    "notify": (*_ABOVE, "idem_assets.lake", "idem_assets.landing", "idem_assets.stream"),
    "spark": _ABOVE,
}
_OWN_MODULES = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules if name.startswith("idem_assets."))))
"""


@pytest.mark.parametrize("layer", sorted(_FORBIDDEN))
def test_a_layer_imports_only_the_layers_below_it(layer: str):
    done = run_python("-c", _OWN_MODULES, f"idem_assets.{layer}")
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout)
    assert f"idem_assets.{layer}" in loaded  # the probe sees the project's modules
    upward = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in _FORBIDDEN[layer])]
    assert upward == [], f"idem_assets.{layer} imports {upward}"


def test_the_probe_sees_dagster_where_it_is_imported():
    """The same probe on the resources (the Dagster side) lists dagster: the test can fail."""
    done = run_python("-c", _PROBE, "idem_assets.resources")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dagster" in json.loads(done.stdout)


def _lib_imports() -> dict[str, set[str]]:
    """Each lib module's imports of other lib modules, and where they are (top or inside)."""
    import ast
    from pathlib import Path

    import idem_assets.lib

    root = Path(idem_assets.lib.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(("idem_assets.lib", *parts)).removesuffix(".__init__")
        tree = ast.parse(path.read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "idem_assets.lib"
            ):
                found.add(node.module or "")
        graph[name] = found
    return graph


def test_lib_imports_form_no_circle():
    """No module of lib/ reaches itself through its imports (imports inside functions too;
    the one pair that names each other for type hints only is allowed)."""
    graph = _lib_imports()
    typing_only = {("idem_assets.lib.asset_def", "idem_assets.lib.checks.per_partition")}

    def reaches(start: str, node: str, seen: set[str]) -> bool:
        for nxt in graph.get(node, ()):
            if (node, nxt) in typing_only or nxt in ("idem_assets.lib",):
                continue
            if nxt == start:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(start, nxt, seen):
                    return True
        return False

    circles = [name for name in graph if reaches(name, name, set())]
    assert circles == [], f"import circles through {circles}"


# Loaded by a run when it reads or writes rows, never by loading the definitions: together
# about 0.4 s in every process that loads the code location (benchmarks family F).
_RUN_ONLY = (
    "pyarrow",
    "pandas",
    "numpy",
    "polars",
    "pyspark",
    "psycopg",
    "dagster_deltalake.handler",
)
_LOADED = """
import json, sys
import idem_assets.definitions
from idem_assets.definitions import defs
defs.resolve_asset_graph()
print(json.dumps(sorted(name for name in sys.modules)))
"""


def test_loading_the_code_location_imports_no_run_only_library():
    done = run_python("-c", _LOADED)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout)
    assert "dagster" in loaded and "idem_assets.lib" in loaded  # the probe sees imports
    early = [m for m in loaded if any(m == r or m.startswith(r + ".") for r in _RUN_ONLY)]
    assert early == [], f"loading the code location imports {early}"
