"""The project's wheel, built offline from a copy of its sources (the working tree stays clean)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(workdir: Path) -> Path:
    """Build ``idem_assets-*.whl`` under ``workdir/dist`` with this interpreter's setuptools."""
    source = workdir / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "idem_assets", source / "idem_assets", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = workdir / "dist"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--wheel-dir",
        str(dist),
        str(source),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"wheel build failed:\n{done.stdout}\n{done.stderr}")
    wheels = list(dist.glob("idem_assets-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {dist}, found {wheels}")
    return wheels[0]
