"""The code location's Definitions, found as ``dagster``/``dg`` find them."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path

import dagster as dg


class CheckCommandError(Exception):
    """A usage problem the command reports in one line (exit 2)."""


def _pyproject_module(start: Path) -> str | None:
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            tool = tomllib.loads(path.read_text()).get("tool", {})
            project = tool.get("dg", {}).get("project", {})
            module = project.get("code_location_target_module") or tool.get("dagster", {}).get(
                "module_name"
            )
            if module:
                if str(folder) not in sys.path:
                    sys.path.insert(0, str(folder))
                return str(module)
    return None


def load_definitions(
    module_name: str | None, python_file: str | None, attribute: str | None, cwd: Path
) -> dg.Definitions:
    """The code location's Definitions, found as ``dagster``/``dg`` find it."""
    if python_file:
        path = Path(python_file)
        if not path.is_file():
            raise CheckCommandError(f"no such file: {python_file}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        spec.loader.exec_module(module)
    else:
        name = module_name or _pyproject_module(cwd)
        if name is None:
            raise CheckCommandError(
                "no code location: pass -m MODULE or -f FILE, or run where a pyproject.toml "
                "declares [tool.dg.project] code_location_target_module"
            )
        module = importlib.import_module(name)
    found = (
        [getattr(module, attribute)]
        if attribute
        else [value for value in vars(module).values() if isinstance(value, dg.Definitions)]
    )
    if attribute is None and not found and hasattr(module, "defs"):
        found = [module.defs]
    if len(found) != 1:
        raise CheckCommandError(
            f"{module.__name__} has {len(found)} Definitions objects; name one with -a"
        )
    value = found[0]
    definitions = value() if callable(value) and not isinstance(value, dg.Definitions) else value
    if not isinstance(definitions, dg.Definitions):
        raise CheckCommandError(f"{module.__name__}.{attribute} is not a dagster Definitions")
    return definitions
