"""Run by the venv under test: import the installed package, check what it imports is declared.

Prints one JSON object: where the package was imported from, whether py.typed shipped,
modules that failed to import, and third-party distributions imported by the package's
own source that no base (non-extra) requirement brings in.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as metadata
import json
import pkgutil
import sys
import traceback
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = "idem_assets"
# Subpackages that need an optional extra, and the extra that provides their imports.
EXTRA_SUBPACKAGES = {
    "idem_assets.spark": "spark",
    "idem_assets.spark_resources": "spark",
    "idem_assets.instance.postgres": "postgres",
    # `make run`'s supervisor serves the UI: Dagster's webserver.
    "idem_assets.serve": "ui",
}


def _extra_of(module: str) -> str | None:
    for prefix, extra in EXTRA_SUBPACKAGES.items():
        if module == prefix or module.startswith(prefix + "."):
            return extra
    return None


def _requirements(dist: str, extras: set[str]) -> list[Requirement]:
    """Requirements of an installed distribution that apply with the given extras."""
    wanted = []
    for text in metadata.requires(dist) or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras | {""}):
            wanted.append(requirement)
    return wanted


def closure(extras: set[str]) -> set[str]:
    """Canonical names of every distribution the package pulls in with ``extras``."""
    seen: set[str] = set()
    queue = [(PACKAGE, extras)]
    while queue:
        dist, dist_extras = queue.pop()
        for requirement in _requirements(dist, dist_extras):
            name = canonicalize_name(requirement.name)
            key = f"{name}[{','.join(sorted(requirement.extras))}]"
            if key in seen:
                continue
            seen.add(key)
            queue.append((requirement.name, set(requirement.extras)))
    return {key.split("[", 1)[0] for key in seen}


def imported_top_levels(root: Path, module_prefix: str) -> dict[str, set[str]]:
    """Top-level names each source file of the package imports, keyed by module."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        relative = path.relative_to(root.parent).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        names = found.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {module: names for module, names in found.items() if module.startswith(module_prefix)}


def main() -> None:
    """Import everything, compare imports with declared requirements, print the findings."""
    package = importlib.import_module(PACKAGE)
    root = Path(package.__file__).parent
    failures = {}
    for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        if _extra_of(info.name) is not None:
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - every failure is reported, with its traceback
            failures[info.name] = traceback.format_exc(limit=3)
    providers = metadata.packages_distributions()
    undeclared: dict[str, list[str]] = {}
    closures: dict[str | None, set[str]] = {}
    for module, names in imported_top_levels(root, PACKAGE).items():
        extra = _extra_of(module)
        if extra not in closures:
            closures[extra] = closure({extra} if extra else set())
        for name in names:
            if name in sys.stdlib_module_names or name == PACKAGE:
                continue
            dists = {canonicalize_name(d) for d in providers.get(name, [name])}
            if not dists & closures[extra]:
                undeclared.setdefault(name, []).append(module)
    print(
        json.dumps(
            {
                "package_file": package.__file__,
                "py_typed": (root / "py.typed").is_file(),
                "import_failures": failures,
                "undeclared": {name: sorted(mods) for name, mods in sorted(undeclared.items())},
            }
        )
    )


if __name__ == "__main__":
    main()
