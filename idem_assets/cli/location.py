"""The code location's Definitions, found as ``dg`` and ``dagster`` find them.

Which module (dagster/dg 1.13):

1. ``-f FILE`` or ``-m MODULE`` (not both), imported with the working directory on
   ``sys.path`` as ``dagster``'s own ``-f``/``-m`` do
   (``_get_workspace_load_target_from_cli_opts``); ``-f`` also puts the file's folder there.
2. Else the nearest folder, from the working directory up, holding a ``dg.toml`` or a
   ``pyproject.toml`` with a ``[tool.dg]`` or ``[tool.dagster]`` table
   (``dagster_shared.utils.config.discover_config_file``, ``has_pyproject_dagster_block``).
   Its ``[tool.dg.project]`` names ``code_location_target_module``, else
   ``<root_module>.definitions`` (``DgContext.code_location_target_module_name``); failing
   that, ``[tool.dagster]`` names ``module_name`` or a single ``modules`` entry
   (``dagster._core.workspace.load_target.get_target_from_toml_data``, which takes no
   ``python_file`` or ``working_directory`` from the file). That folder, and its ``src/``
   where dg looks for the package (``DgContext.get_path_for_local_module``), go on
   ``sys.path``, so a project that is not installed still imports.

Which Definitions in it: the ``-a`` attribute, called when it is a function
(``reconstruct.def_from_pointer``); else the module's one ``@dg.definitions`` function, else
its one ``Definitions`` object (``autodiscovery.loadable_targets_from_loaded_module``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg
from dagster.components.definitions import LazyDefinitions

_FLAGS = "pass -m MODULE or -f FILE"


class CheckCommandError(Exception):
    """A usage problem the command reports in one line (exit 2)."""


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise CheckCommandError(f"cannot read {path}: {error}") from error


def _config_in(folder: Path) -> Path | None:
    """dg's config file in ``folder``: a ``dg.toml`` hides the ``pyproject.toml`` beside it,
    which counts only with a dg or dagster table (else dg and dagster look further up)."""
    if (folder / "dg.toml").is_file():
        return folder / "dg.toml"
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file() and {"dg", "dagster"} & _toml(pyproject).get("tool", {}).keys():
        return pyproject
    return None


def _nearest_config(cwd: Path) -> Path:
    for folder in (cwd, *cwd.parents):
        config = _config_in(folder)
        if config:
            return config
    raise CheckCommandError(
        f"no code location: no dg.toml, and no pyproject.toml with [tool.dg] or "
        f"[tool.dagster], in {cwd} or any folder above it; {_FLAGS}"
    )


def _declared_module(config: Path) -> str:
    """The module ``config`` names. dg reads only ``[tool.dg.project]``, dagster reads
    ``[tool.dagster]`` first; they differ only when a file names two modules, and then dg's
    wins: the file is a dg project's."""
    data = _toml(config)
    tool = data.get("tool", {})
    # dg.toml holds dg's settings at its top level, pyproject.toml under [tool.dg]
    project = (data if config.name == "dg.toml" else tool.get("dg", {})).get("project", {})
    if project.get("code_location_target_module"):
        return str(project["code_location_target_module"])
    if project.get("root_module"):
        return f"{project['root_module']}.definitions"
    dagster_table = tool.get("dagster", {})
    if dagster_table.get("module_name"):
        return str(dagster_table["module_name"])
    modules = [m["name"] for m in dagster_table.get("modules", []) if m.get("type") == "module"]
    if len(modules) > 1:
        raise CheckCommandError(
            f"{config} [tool.dagster] modules names {len(modules)} code locations "
            f"({', '.join(modules)}): pass -m with one"
        )
    if not modules:
        raise CheckCommandError(
            f"no code location: {config} names none ([tool.dg.project] root_module or "
            f"code_location_target_module, [tool.dagster] module_name or modules); {_FLAGS}"
        )
    return str(modules[0])


def _on_sys_path(*folders: Path) -> None:
    for folder in reversed(folders):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def _import_module(name: str, named_by: str) -> ModuleType:
    """The module, or a one-line error when the module itself is missing (an import that
    fails inside it is the user's bug and keeps its traceback)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not f"{name}.".startswith(f"{error.name}."):
            raise
        raise CheckCommandError(
            f"cannot import {name} (named by {named_by}): {error}; is the project installed?"
        ) from error


def _import_file(python_file: str, cwd: Path) -> ModuleType:
    """The file as a module registered under its stem, as dagster's ``load_python_file``."""
    path = cwd / python_file
    if not path.is_file():
        raise CheckCommandError(f"no such file: {python_file}")
    _on_sys_path(cwd, path.resolve().parent)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _the_one(module: ModuleType) -> tuple[str, object]:
    """The module's one ``@dg.definitions`` function, else its one Definitions object."""
    scope = vars(module).items()
    lazy = {name: value for name, value in scope if isinstance(value, LazyDefinitions)}
    found = lazy or {name: value for name, value in scope if isinstance(value, dg.Definitions)}
    if len(found) != 1:
        kind = "@dg.definitions functions" if lazy else "Definitions objects"
        names = f" ({', '.join(sorted(found))})" if found else ""
        raise CheckCommandError(
            f"{module.__name__} has {len(found)} {kind}{names}; name one with -a"
        )
    return next(iter(found.items()))


def _definitions_in(module: ModuleType, attribute: str | None) -> dg.Definitions:
    if attribute and not hasattr(module, attribute):
        raise CheckCommandError(f"{module.__name__} has no attribute {attribute}")
    name, value = (attribute, getattr(module, attribute)) if attribute else _the_one(module)
    definitions = value() if callable(value) else value
    if not isinstance(definitions, dg.Definitions):
        raise CheckCommandError(f"{module.__name__}.{name} is not a dagster Definitions")
    return definitions


def load_definitions(
    module_name: str | None, python_file: str | None, attribute: str | None, cwd: Path
) -> dg.Definitions:
    """The code location's Definitions, found as ``dg``/``dagster`` find it (see above)."""
    cwd = cwd.absolute()
    if python_file and module_name:
        raise CheckCommandError("pass one of -m MODULE and -f FILE, not both")
    if python_file:
        module = _import_file(python_file, cwd)
    elif module_name:
        _on_sys_path(cwd)
        module = _import_module(module_name, "-m")
    else:
        config = _nearest_config(cwd)
        root = config.parent
        _on_sys_path(*([root / "src"] if (root / "src").is_dir() else []), root)
        module = _import_module(_declared_module(config), str(config))
    return _definitions_in(module, attribute)
