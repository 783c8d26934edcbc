"""The README's command-line and CI sections, run verbatim on what `make run` lays out.

A copy of the project (sharing this virtualenv) gets its sample data and instance from
`make sample-data dagster-home`, as `make run` prepares them; then the README's bash blocks
run as written, in one shell, from the project root. Every command must exit 0 and do what
the README says it does: the lake holds the launched days, the check run passes and writes
its JUnit report where the README says. A range with no landing files says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pytest

from idem_assets.lake import LakeTable, read_rows
from idem_assets_tests.ui.server import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

README = ROOT / "README.md"
# What the user runs in a terminal of its own (the UI is served by `make run`).
LONG_RUNNING = ("dg dev",)


def readme_block(heading: str) -> list[str]:
    """The commands of the first bash block under ``heading``, continuation lines joined."""
    section = README.read_text().split(f"\n{heading}\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    commands: list[str] = []
    pending = ""
    for line in block.splitlines():
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        commands.append(pending.strip())
        pending = ""
    return [c for c in commands if c and not c.startswith(LONG_RUNNING)]


def _project_copy(root: Path) -> Path:
    """The project's files beside a link to this checkout's package and virtualenv."""
    project = root / "project"
    project.mkdir()
    for name in ("Makefile", "README.md", "pyproject.toml", "workspace.yaml"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "deploy", project / "deploy")
    for name in ("idem_assets", ".venv"):
        (project / name).symlink_to(ROOT / name)
    return project


def _clean_env() -> dict[str, str]:
    """A new terminal's environment: no instance, no lake settings, no virtualenv active."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("IDEM_", "DAGSTER_", "VIRTUAL_ENV", "PYTHON"))
    }
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def _run(project: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` from the project root, in a new terminal's environment."""
    return subprocess.run(
        argv, cwd=project, env=_clean_env(), capture_output=True, text=True, timeout=1200
    )


def _bash(project: Path, commands: list[str]) -> subprocess.CompletedProcess[str]:
    return _run(project, ["bash", "-c", "set -euo pipefail\n" + "\n".join(commands) + "\n"])


def test_the_readme_command_line_and_ci_sections_work_verbatim_after_make_run(tmp_path):
    project = _project_copy(tmp_path)
    # make run's preparation: sample data (the last 14 days) and the instance profile. The
    # virtualenv is this one (-o: never reinstalled from the copy).
    prepared = _run(
        project,
        ["make", "--no-print-directory", "-o", ".venv/.installed", "sample-data", "dagster-home"],
    )
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    assert "sample data: 14 days from" in prepared.stdout, prepared.stdout

    cli = readme_block("## From the command line")
    ci = readme_block("## Asset checks in CI")
    assert any(c.startswith("dg launch") for c in cli) and ci
    done = _bash(project, [*cli, *ci, 'echo "DAYS=$DAYS LAST=$LAST"'])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    days = re.search(r"^DAYS=(\S+)\.\.\.(\S+) LAST=(\S+)$", done.stdout, re.MULTILINE)
    assert days is not None, done.stdout[-2000:]
    first, last, last_again = days.groups()
    assert last == last_again
    # The sample days: two weeks ending yesterday (UTC) or today, as make laid them out.
    orders = LakeTable(str(project / "data" / "lake" / "orders")).open()
    sales = LakeTable(str(project / "data" / "lake" / "daily_sales")).open()
    assert orders is not None and sales is not None
    order_days = {d.isoformat() for d in read_rows(orders).column("order_date").to_pylist()}
    assert min(order_days) == first and max(order_days) == last
    assert len(order_days) == 14
    sales_days = read_rows(sales).column("order_date")
    assert pc.count_distinct(sales_days).as_py() == 14

    # The CI section: every check of every day passed, no day without files, the report is
    # where the README says.
    assert "0 ERROR failed" in done.stdout, done.stdout[-3000:]
    assert "had no landing files" not in done.stdout
    report = (project / "data" / "asset-checks.xml").read_text()
    assert 'failures="0"' in report and "rerun_equality[" + last + "]" in report

    # Days nobody delivered are named as such, not passed off as loaded days.
    empty = _bash(
        project,
        [
            "source .venv/bin/activate && export DAGSTER_HOME=$PWD/.dagster_home",
            "idem-assets check --select orders --partition-range 2024-03-01...2024-03-03 "
            "--materialize",
        ],
    )
    assert empty.returncode == 0, empty.stdout[-3000:] + empty.stderr[-3000:]
    assert "orders: 3 of 3 day(s) had no landing files (2024-03-01, 2024-03-02, 2024-03-03)" in (
        empty.stdout
    )
