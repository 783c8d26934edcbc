"""Modules imported when first used rather than when the code location is imported.

Polars is imported by many modules but used only while a run reads or writes, and it
costs ~200 ms to import: in every process that imports the code location (the code
server, each run worker, ``dg`` commands), before it does anything. A module that uses
it throughout binds it lazily, with the real module for type checkers::

    from typing import TYPE_CHECKING

    from idem_assets._lazy import lazy_module

    if TYPE_CHECKING:
        import polars as pl
    else:
        pl = lazy_module("polars")

Annotations stay strings (``from __future__ import annotations``); module-level values
must not touch the module (build them in functions). A module that uses it in one or two
functions imports it there instead (``# here, not at import``), as the PostgreSQL
connection does psycopg (~60 ms that a SQLite store never needs).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for a module; the first attribute read imports it, later reads are forwarded.

    Thread-safe: ``importlib.import_module`` holds the module's import lock, so threads
    reading their first attribute at once import it once and all get the same module.
    """

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            if attribute.startswith("_"):
                # A probe of the stand-in, not a use of the module: Dagster's defs loader asks
                # every module member for its private markers, copy and pickle for hooks.
                raise AttributeError(attribute)
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A stand-in for module ``name`` that imports it on first use."""
    return LazyModule(name)
