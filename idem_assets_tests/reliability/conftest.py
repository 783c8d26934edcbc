"""Reliability fixtures: one generated landing zone shared by a module's lakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START

LANDING_DAYS = 4
SEED = 7


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four days of generated landing files (seed 7), shared read-only by a module's lakes."""
    root = tmp_path_factory.mktemp("landing")
    generate(root, START, LANDING_DAYS, SEED)
    return root
