"""The Example sections of the public entry points run as written (doctest)."""

from __future__ import annotations

import doctest
import logging

import pytest

from idem_assets import IdempotentDeltaIOManager, LandingSource, WriteSpec, lake_asset

ENTRY_POINTS = [IdempotentDeltaIOManager, WriteSpec, lake_asset, LandingSource]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry.__name__)
def test_the_example_of_each_public_entry_point_runs_as_written(entry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything an example writes by default stays here
    logging.getLogger("dagster").setLevel(logging.ERROR)
    docstring = entry.__doc__ or ""
    assert "Example:" in docstring and ">>>" in docstring, f"{entry.__name__} has no example"
    parser = doctest.DocTestParser()
    test = parser.get_doctest(docstring, {}, entry.__name__, entry.__module__, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 3 and result.failed == 0, result
