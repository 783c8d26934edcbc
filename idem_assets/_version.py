"""The package's version, in the lowest layer: every stamp that names it imports it from here.

Read from the installed distribution's metadata (pyproject.toml's ``version``), so the
number has one source; a source tree that was never installed reports ``0+unknown``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("idem_assets")
except PackageNotFoundError:  # pragma: no cover - only a never-installed checkout
    __version__ = "0+unknown"
