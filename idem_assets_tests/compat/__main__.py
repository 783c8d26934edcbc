"""``make test-compat``: the compatibility suite on the newest and the oldest releases allowed.

For each set, a fresh virtualenv gets the project's wheel (built offline from this checkout)
and its dependencies as a resolver picks them from pyproject.toml's ranges: **newest**, the
highest releases the index serves that fit together; **oldest**, the lowest release of every
dependency the project declares (uv's ``lowest-direct``: what they need in turn resolves to
its newest). The test tools come at the locked versions, so only the project's dependencies
differ between the sets. The suite (``SUITE``) then runs from a folder outside the checkout,
so every import of ``idem_assets`` is the installed wheel's.

    python -m idem_assets_tests.compat                 # both sets, one after the other
    python -m idem_assets_tests.compat --sets oldest   # one set
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from idem_assets_tests.build_wheel import ROOT, build_wheel

SETS = ("newest", "oldest")
EXTRAS = ("ui", "dg", "postgres", "spark")
# Every Dagster surface the library touches, on real tables: the IO manager, checks per
# partition, sensors and the known-answer fingerprint (compat/test_surfaces.py), the docs'
# complete examples (library, deployment, migrating), and a team's own project scaffolded
# by create-dagster with a source declared in YAML, driven through dg and idem-assets
# exactly as the README's "Use it in your own project" says.
SUITE = (
    "idem_assets_tests/compat/test_surfaces.py",
    "idem_assets_tests/compat/test_team_project.py",
    "idem_assets_tests/deploy/test_docs_examples.py",
)
# Installed beside the wheel at the locked versions (test tools, and the scaffolder the README
# asks a team to install, in dagster-dg-cli's range).
TOOLS = ("pytest", "pytest-timeout")
# The packages whose versions each set reports.
REPORTED = (
    "dagster",
    "dagster-webserver",
    "dagster-dg-cli",
    "dagster-deltalake",
    "dagster-postgres",
    "dagster-pyspark",
    "create-dagster",
    "deltalake",
    "pyarrow",
    "polars",
    "numpy",
    "pandas",
    "pydantic",
    "pyyaml",
    "psycopg",
    "obstore",
    "pyspark",
)


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise SystemExit("uv is not installed: run `make install` (it is a dev dependency)")
    return found


def _locked(name: str) -> str:
    """``name==version`` from requirements/lock.txt."""
    pattern = re.compile(rf"^{re.escape(name)}==(\S+)$", re.IGNORECASE | re.MULTILINE)
    found = pattern.search((ROOT / "requirements" / "lock.txt").read_text())
    if found is None:
        raise SystemExit(f"{name} is not in requirements/lock.txt")
    return f"{name}=={found.group(1)}"


def _declared() -> list[str]:
    """The project's own requirements with the extras the suite installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = list(project["dependencies"])
    for extra in EXTRAS:
        found += project["optional-dependencies"][extra]
    return found


def _scaffolder() -> str:
    """create-dagster in dagster-dg-cli's declared range (they are released together)."""
    for requirement in _declared():
        if requirement.startswith("dagster-dg-cli"):
            return "create-dagster" + requirement.removeprefix("dagster-dg-cli")
    raise SystemExit("pyproject.toml declares no dagster-dg-cli")


def _install(which: str, wheel: Path, home: Path) -> Path:
    """A fresh virtualenv for ``which`` with the wheel and its dependencies resolved."""
    venv = home / which
    uv = _uv()
    env = {**os.environ, "VIRTUAL_ENV": ""}
    subprocess.run(
        [uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)],
        check=True,
        env=env,
    )
    python = venv / "bin" / "python"
    argv = [uv, "pip", "install", "--quiet", "--python", str(python)]
    wanted = [f"{wheel}[{','.join(EXTRAS)}]", _scaffolder()]
    if which == "oldest":
        argv += ["--resolution", "lowest-direct"]
        wanted += _declared()
    wanted += [_locked(tool) for tool in TOOLS]
    subprocess.run(argv + wanted, check=True, env=env)
    return python


def _versions(python: Path) -> dict[str, str]:
    listed = subprocess.run(
        [_uv(), "pip", "list", "--python", str(python), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = {row["name"].lower(): row["version"] for row in json.loads(listed.stdout)}
    return {name: found.get(name, "-") for name in REPORTED}


def _run_suite(which: str, python: Path, home: Path, wheel: Path, extra: list[str]) -> int:
    workdir = home / f"{which}-run"
    workdir.mkdir()
    bin_dir = str(python.parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "DAGSTER_HOME")
        and not key.startswith(("IDEM_", "PYTEST_"))
    }
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(python.parent.parent),
        "IDEM_COMPAT_SET": which,
        "IDEM_COMPAT_WHEELS": str(wheel.parent),
    }
    argv = [
        str(python.parent / "pytest"),
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        f"--rootdir={workdir}",
        "-c",
        str(ROOT / "idem_assets_tests" / "compat" / "pytest.ini"),
        f"--confcutdir={ROOT / 'idem_assets_tests' / 'compat'}",
        f"--junitxml={ROOT / 'test-artifacts' / f'compat-{which}.xml'}",
        *[str(ROOT / path) for path in SUITE],
        *extra,
    ]
    log = ROOT / "test-artifacts" / f"compat-{which}.log"
    with log.open("w") as out:
        return subprocess.run(
            argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def _one_set(which: str, wheel: Path, home: Path, extra: list[str]) -> tuple[dict, int, float]:
    started = time.monotonic()
    python = _install(which, wheel, home)
    installed = time.monotonic()
    versions = _versions(python)
    print(f"[{which}] installed in {installed - started:.0f} s: dagster {versions['dagster']}")
    code = _run_suite(which, python, home, wheel, extra)
    finished = time.monotonic()
    print(
        f"[{which}] suite {'passed' if code == 0 else f'FAILED (exit {code})'} "
        f"in {finished - installed:.0f} s (log: test-artifacts/compat-{which}.log)"
    )
    return versions, code, finished - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idem_assets_tests.compat")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument(
        "--serial", action="store_true", help="one set after the other (default: side by side)"
    )
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (after --)")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress as it happens
    home = ROOT / "build" / "compat"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    started = time.monotonic()
    wheel = build_wheel(home)
    print(f"built {wheel.name}")
    # The two sets share nothing but uv's cache: side by side, the installs overlap their
    # downloads and each suite waits mostly on its own child processes.
    with ThreadPoolExecutor(max_workers=1 if args.serial else len(args.sets)) as pool:
        results = dict(
            zip(
                args.sets,
                pool.map(lambda which: _one_set(which, wheel, home, args.pytest_args), args.sets),
                strict=True,
            )
        )
    width = max(len(name) for name in REPORTED)
    print(f"\n{'package':<{width}}  " + "  ".join(f"{which:<10}" for which in args.sets))
    for name in REPORTED:
        row = "  ".join(f"{results[which][0][name]:<10}" for which in args.sets)
        print(f"{name:<{width}}  {row}")
    print(
        "suite    "
        + " " * (width - 7)
        + "  ".join(f"{('passed' if results[w][1] == 0 else 'FAILED'):<10}" for w in args.sets)
    )
    print("seconds  " + " " * (width - 7) + "  ".join(f"{results[w][2]:<10.0f}" for w in args.sets))
    print(f"test-compat took {time.monotonic() - started:.0f} s")
    failed = [which for which in args.sets if results[which][1] != 0]
    for which in failed:
        print(f"\n--- {which}: last lines of test-artifacts/compat-{which}.log ---")
        print(
            "\n".join(
                (ROOT / "test-artifacts" / f"compat-{which}.log").read_text().splitlines()[-60:]
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
