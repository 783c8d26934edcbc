"""Project-wide fixtures: real landing zones, lakes, PostgreSQL and Dagster instances; and
the order test files are handed to the workers in."""

import subprocess
from pathlib import Path

import pytest

from idem_assets_tests.harness import Project, new_project
from idem_assets_tests.waiting import tail

pytest_plugins = [
    "idem_assets_tests.fixtures.postgres",
    "idem_assets_tests.fixtures.s3",
    "idem_assets_tests.fixtures.spark",
    "idem_assets_tests.fixtures.spark_cluster",
    "idem_assets_tests.fixtures.stores",
]
# The compatibility suite runs against an installed wheel in virtualenvs of its own
# (`make test-compat`, python -m idem_assets_tests.compat), not in this environment.
collect_ignore = ["compat"]


@pytest.fixture
def project(tmp_path) -> Project:
    """Four generated landing days (seed 7), an empty lake and an ephemeral instance."""
    return new_project(tmp_path, days=4)


# The longest test files, longest first (summed seconds in the table `make test` prints:
# the cluster ~210 s, the soak ~180 s, the 2,406-day history ~170 s, the browser ~125 s).
# `make test` passes --no-loadscope-reorder, so the workers take files in collection order:
# these start first and the many short files fill in beside them. xdist's default order,
# most tests per file first, left the one-test soak to run alone at the end.
LONGEST_FIRST = (
    "spark/test_cluster.py",
    "reliability/test_soak.py",
    "tpch/test_history.py",
    "ui/test_ui.py",
)
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the longest files to the front; the rest keep their order (a stable sort)."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}

    def place(item: pytest.Item) -> int:
        try:
            relative = item.path.relative_to(_HERE).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(relative, len(rank))

    items.sort(key=place)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A child process that outlived its timeout: show what it printed beside the failure
    (``subprocess.run`` and ``communicate`` keep it on the exception; the message names
    only the command)."""
    report = yield
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, subprocess.TimeoutExpired):
        for name, output in (("stdout", error.stdout), ("stderr", error.stderr)):
            if output is not None:  # None: not captured, already in pytest's own capture
                report.sections.append((f"timed-out process {name}", tail(output)))
    return report
