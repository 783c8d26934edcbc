"""Project-wide fixtures: real landing zones, lakes, PostgreSQL and Dagster instances."""

import pytest

from idem_assets_tests.harness import Project, new_project

pytest_plugins = [
    "idem_assets_tests.fixtures.postgres",
    "idem_assets_tests.fixtures.s3",
    "idem_assets_tests.fixtures.spark",
    "idem_assets_tests.fixtures.spark_cluster",
    "idem_assets_tests.fixtures.stores",
]


@pytest.fixture
def project(tmp_path) -> Project:
    """Four generated landing days (seed 7), an empty lake and an ephemeral instance."""
    return new_project(tmp_path, days=4)


# `make test` gives each of its workers a test file at a time, in collection order: a long
# file collected late runs alone at the end while the other worker idles. So the soak (about
# 5 minutes) goes first, then the files marked slow, then the rest (each group in its order).
_LONGEST = "idem_assets_tests/reliability/test_soak.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first (the same order in every worker, as xdist requires)."""

    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith(_LONGEST):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)
