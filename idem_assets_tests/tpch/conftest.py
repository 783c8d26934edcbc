"""A TPC-H landing zone laid out once for the package, and tpchgen-cli's own output beside it."""

from pathlib import Path

import pytest

from idem_assets.sample.tpch import TpchgenOutput, TpchLayoutSummary, lay_out_tpch, run_tpchgen

SCALE = 0.01
# Enough days for line items to ship on most of them (the first ships on 1992-01-04).
DAYS = 14


@pytest.fixture(scope="package")
def tpchgen_output(tmp_path_factory) -> TpchgenOutput:
    """tpchgen-cli's files at SCALE, untouched: what the layout is compared against."""
    return run_tpchgen(SCALE, tmp_path_factory.mktemp("tpchgen"))


@pytest.fixture(scope="package")
def tpch_landing(tmp_path_factory) -> TpchLayoutSummary:
    """DAYS days of TPC-H at SCALE laid out in a landing directory."""
    return lay_out_tpch(Path(tmp_path_factory.mktemp("landing")), SCALE, DAYS)
