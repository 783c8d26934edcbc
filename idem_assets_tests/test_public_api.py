"""The public face: ``from idem_assets import ...`` gives every name a project needs."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import idem_assets
from idem_assets_tests.processes import run_python

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_IMPORT = re.compile(r"^\s*from (idem_assets[\w.]*) import", re.MULTILINE)
# Where the Dagster-facing names live; an example importing from here bypasses the face.
_INTERNAL = (
    "idem_assets.io_manager",
    "idem_assets.lib",
    "idem_assets.resources",
    "idem_assets.partitions",
    "idem_assets.sources",
)


@pytest.mark.parametrize("name", idem_assets.__all__)
def test_each_public_name_is_its_home_modules_object(name: str):
    value = getattr(idem_assets, name)
    if name == "__version__":
        # One source: pyproject.toml's version, read back from the installed metadata; the
        # changelog has its section.
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        assert re.fullmatch(r"\d+\.\d+\.\d+", value)
        assert value == metadata.version("idem_assets") == declared
        assert f"\n## {value}\n" in (ROOT / "CHANGELOG.md").read_text()
        return
    home = sys.modules[idem_assets._EXPORTS[name]]
    assert getattr(home, name) is value


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'write_spec'"):
        idem_assets.write_spec  # noqa: B018


def test_the_package_and_its_dagster_free_names_import_no_dagster():
    probe = (
        "import json, sys, idem_assets; idem_assets.open_store; idem_assets.Status;"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster')))"
    )
    done = run_python("-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    "doc",
    ["README.md", "docs/library.md", "docs/landing.md", "docs/migrating.md", "docs/deployment.md"],
)
def test_examples_import_dagster_facing_names_from_the_package(doc: str):
    text = (ROOT / doc).read_text()
    modules = [m for block in _BLOCK.findall(text) for m in _IMPORT.findall(block)]
    assert modules, f"{doc} has no example importing idem_assets"
    bypassing = sorted({m for m in modules if m.startswith(_INTERNAL)})
    assert bypassing == [], f"{doc} imports from internal modules: {bypassing}"
