"""The compatibility suite runs only against an installed wheel (``make test-compat``)."""

from __future__ import annotations

import os
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

# The suite's own fixtures come from the checkout, appended after site-packages so that
# `import idem_assets` stays the installed wheel's (installed_wheel below makes sure).
sys.path.append(str(Path(__file__).resolve().parents[2]))
from idem_assets_tests.fixtures.postgres import (  # noqa: E402
    fresh_postgres_url,
    postgres_server,
)

__all__ = ["fresh_postgres_url", "installed_wheel", "postgres_server", "pytest_report_header"]

NAMES = ("dagster", "dagster-deltalake", "dagster-dg-cli", "deltalake", "pyarrow", "polars")


def pytest_report_header(config: pytest.Config) -> str:
    """The set under test and the versions it resolved to."""
    found = []
    for name in NAMES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} -")
    return f"compatibility set {os.environ.get('IDEM_COMPAT_SET', '?')}: " + ", ".join(found)


@pytest.fixture(scope="session", autouse=True)
def installed_wheel() -> Path:
    """The installed package, never the checkout's sources."""
    import idem_assets

    where = Path(idem_assets.__file__).resolve()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    if not where.is_relative_to(site):
        pytest.fail(
            f"idem_assets was imported from {where}, not from {site}: run the suite through "
            "`python -m idem_assets_tests.compat`"
        )
    return where.parent
