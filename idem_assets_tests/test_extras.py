"""A missing optional dependency names the extra that installs it."""

from __future__ import annotations

import pytest

from idem_assets_tests.processes import run_python

# Makes the named package unimportable, as in an install without the extra.
_WITHOUT = """
import sys
sys.modules[sys.argv[1]] = None
exec(sys.argv[2])
"""


@pytest.mark.parametrize(
    ("missing", "code", "extra"),
    [
        ("pyspark", "import idem_assets.spark", "spark"),
        (
            "dagster_pyspark",
            "from idem_assets.resources import SparkResource; SparkResource().session()",
            "spark",
        ),
        (
            "psycopg",
            "from idem_assets.checkpoint import open_store; "
            "open_store('postgresql://nobody@127.0.0.1:9/none')",
            "postgres",
        ),
    ],
)
def test_a_missing_optional_dependency_says_which_extra_installs_it(missing, code, extra):
    done = run_python("-c", _WITHOUT, missing, code)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"ModuleNotFoundError: {missing} is not installed: it comes with the {extra!r} "
        f"extra, pip install 'idem_assets[{extra}]'"
    ), done.stderr[-2000:]
