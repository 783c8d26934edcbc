"""Optional dependencies: a missing one is named with the extra that installs it."""

from __future__ import annotations

import importlib.util


def require_extra(module: str, extra: str) -> None:
    """Raise ``ModuleNotFoundError`` naming ``pip install 'idem_assets[extra]'`` when
    ``module`` cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a None entry
        found = False
    if not found:
        raise ModuleNotFoundError(
            f"{module} is not installed: it comes with the {extra!r} extra, "
            f"pip install 'idem_assets[{extra}]'",
            name=module,
        )
