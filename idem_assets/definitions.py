"""The code location: everything under ``idem_assets/defs`` plus project-wide resources.

``defs/`` holds YAML components (the declared landing sources) and Python modules (the
downstream assets, jobs, schedules); ``load_from_defs_folder`` finds them all.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import dagster as dg

from idem_assets.lib.resources import default_resources

_PACKAGE = Path(__file__).resolve().parent


def project_definitions() -> dg.Definitions:
    """Every definition declared under ``idem_assets/defs``, without resources."""
    if (_PACKAGE.parent / "pyproject.toml").is_file():
        return dg.load_from_defs_folder(path_within_project=_PACKAGE)
    # An installed wheel carries no pyproject.toml: load the same folder from the module.
    defs_module = importlib.import_module("idem_assets.defs")
    return dg.ComponentTree.from_module(defs_module=defs_module,
                                        project_root=_PACKAGE.parent).build_defs()


def build_definitions(resources: dict[str, object]) -> dg.Definitions:
    """Every domain's definitions bound to ``resources``."""
    return dg.Definitions.merge(project_definitions(), dg.Definitions(resources=resources))


defs = build_definitions(default_resources())
