"""The landing tables run on both engines: ``read_day`` is the local reader or Spark's
executors running it, from one parametrisation, with identical reasons."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from idem_assets.landing import LandingBatch
from idem_assets.landing.contract import SourceContract
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.landing.builders import DAY, assert_conserved


@pytest.fixture
def read_day(engine_read_days):
    """Read one day on the test's engine, checking the conservation invariant on the way."""

    def read(landing: Path, contract: SourceContract = ORDERS, day: dt.date = DAY) -> LandingBatch:
        batch = engine_read_days(landing, contract, day, day + dt.timedelta(days=1))
        assert_conserved(batch, contract)
        return batch

    return read
