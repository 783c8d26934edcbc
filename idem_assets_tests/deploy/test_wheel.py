"""The package installs as a library: a wheel built offline, installed into a fresh venv."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from idem_assets_tests.build_wheel import build_wheel

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("wheel_probe.py")


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_installs_into_a_fresh_venv_and_declares_what_it_imports(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            str(wheel),
        ],
        tmp_path,
    )
    # Dependencies come from the project's environment, appended after the venv's own
    # site-packages (a .pth path line does not run that directory's .pth files, so the
    # project's editable install stays out of the way).
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", where], tmp_path).strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    workdir = tmp_path / "elsewhere"  # not the repository: imports must come from the wheel
    workdir.mkdir()
    report = json.loads(_run([str(python), str(PROBE)], workdir).strip().splitlines()[-1])
    assert Path(report["package_file"]).is_relative_to(site), report["package_file"]
    assert report["py_typed"] is True
    assert report["import_failures"] == {}
    assert report["undeclared"] == {}

    usage = (
        "from idem_assets.lake import LakeTable, fingerprint, overwrite_partitions\n"
        "from idem_assets.checkpoint import open_store\n"
        "from idem_assets.io_manager import WriteSpec\n"
        "from idem_assets.lib.checks import LakeCheck, standard_checks\n"
        "spec = WriteSpec(strategy='merge', natural_key=('id',))\n"
        "print(spec.to_metadata()['idem/strategy'])"
    )
    assert _run([str(python), "-c", usage], workdir).strip().splitlines()[-1] == "merge"
