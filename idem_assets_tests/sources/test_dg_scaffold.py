"""A new project adopts the component with dg: scaffold a source, check it, break it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DG = Path(sys.executable).with_name("dg")


def _dg(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DAGSTER_HOME": str(project / ".dagster_home"),
        "PYTHONPATH": str(project),
        "VIRTUAL_ENV": str(Path(sys.executable).parents[1]),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [str(DG), *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty dg project of a team adopting idem_assets, as `create-dagster` lays it out."""
    root = tmp_path / "shop"
    package = root / "shop"
    (package / "defs").mkdir(parents=True)
    (root / ".dagster_home").mkdir()
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [project]
        name = "shop"
        version = "0.1.0"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "shop"
        registry_modules = ["idem_assets.lib"]

        [tool.dg.cli]
        suppress_warnings = ["project_and_activated_venv_mismatch"]
        """)
    )
    (package / "definitions.py").write_text(
        textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg

        from idem_assets.lib import default_resources


        @dg.definitions
        def defs() -> dg.Definitions:
            return dg.Definitions.merge(
                dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
                dg.Definitions(resources=default_resources()),
            )
        """)
    )
    return root


def test_scaffold_check_list_and_a_broken_declaration(project: Path):
    listed = _dg(project, "list", "components")
    assert listed.returncode == 0, listed.stderr
    assert "idem_assets.lib.LandingSourceComponent" in listed.stdout

    scaffold = _dg(
        project, "scaffold", "defs", "idem_assets.lib.LandingSourceComponent", "payments"
    )
    assert scaffold.returncode == 0, scaffold.stdout + scaffold.stderr
    declaration = project / "shop" / "defs" / "payments" / "defs.yaml"
    text = declaration.read_text()
    assert "type: idem_assets.lib.LandingSourceComponent" in text and "name: payments" in text

    checked = _dg(project, "check", "defs")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    defs = _dg(project, "list", "defs", "--json")
    assert defs.returncode == 0, defs.stderr
    for name in ("payments", "quarantine_share", "rerun_equality", "payments_landing_sensor"):
        assert name in defs.stdout

    declaration.write_text(text.replace("type: int64", "type: money"))
    broken = _dg(project, "check", "defs")
    assert broken.returncode != 0
    output = broken.stdout + broken.stderr
    assert "payments/defs.yaml" in output and "columns.0.type" in output, output
    assert "'money' is not a column type; allowed: int64" in output, output
