"""Project-wide fixtures: real landing zones, lakes and Dagster instances in tmp dirs."""

import pytest

from idem_assets_tests.harness import Project, new_project


@pytest.fixture
def project(tmp_path) -> Project:
    """Four generated landing days (seed 7), an empty lake and an ephemeral instance."""
    return new_project(tmp_path, days=4)
