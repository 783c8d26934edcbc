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
