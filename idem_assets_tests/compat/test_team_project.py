"""A team's own project, from the README's "Use it in your own project", run as written.

The block runs in one bash shell from an empty folder, in the virtualenv of the set under
test: ``pip install "idem_assets[dg]" create-dagster`` finds the wheel just built (everything else
is installed already), create-dagster scaffolds the project, and dg and idem-assets find
its code location with no flags. Then the outcome: the day's rows in the Delta table, the
source's checks passed per partition, no erased key, and the table's pool listed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import deltalake
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## Use it in your own project"


def readme_script() -> str:
    """The section's bash block, verbatim."""
    section = README.read_text().split(f"\n{HEADING}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0]


def test_the_readme_section_installs_scaffolds_and_runs_a_declared_source(tmp_path: Path):
    wheels = os.environ.get("IDEM_COMPAT_WHEELS")
    if not wheels:
        pytest.fail("run through `python -m idem_assets_tests.compat` (it builds the wheel)")
    env = {
        **os.environ,
        # `pip install idem_assets` takes the wheel under test (the name is not on the
        # index); the project's own `pip install -e .` builds with hatchling from the index.
        "PIP_FIND_LINKS": wheels,
        "NO_COLOR": "1",
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    script = "set -euo pipefail\nset -x\n" + readme_script()
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # each command's output after its `+ command` trace line
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout
    assert done.returncode == 0, output[-6000:]

    project = tmp_path / "team"
    table = deltalake.DeltaTable(str(project / "lake" / "orders"))
    rows = table.to_pyarrow_table().to_pylist()
    assert [(r["order_id"], str(r["amount"])) for r in rows] == [(1, "12.50")]

    # idem-assets check printed each check of the day, each passed.
    checked = output.split("+ idem-assets check", 1)[1].split("+ idem-assets erase", 1)[0]
    for name in ("rerun_equality", "unique_natural_key", "conservation", "quarantine_share"):
        assert re.search(rf"^orders\s+2024-03-01\s+{name}\s+yes\b", checked, re.M), checked
    assert "4 check results: 0 ERROR failed, 0 WARN, 0 errors" in checked, checked
    erased = output.split("+ idem-assets erase --status", 1)[1].split("+ idem-assets pools", 1)[0]
    assert "no key has been erased" in erased, erased
    pools = output.split("+ idem-assets pools", 1)[1]
    assert re.search(r"^lake/orders\s+1 writer\(s\)$", pools, re.M), pools
