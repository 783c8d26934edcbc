"""The files docs/architecture.md sends a reader to exist, and hold the names it gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_PATH = re.compile(r"`([A-Za-z_][A-Za-z0-9_./]*\.py)(?:::([A-Za-z_][A-Za-z0-9_.]*))?")
_SOURCES = [
    path
    for folder in ("idem_assets", "idem_assets_tests", "benchmarks")
    for path in (ROOT / folder).rglob("*.py")
]


def _found(named: str) -> list[Path]:
    """The project's files whose path ends with ``named`` (a path as the docs write it)."""
    return [p for p in _SOURCES if p.as_posix().endswith("/" + named)]


def test_every_file_the_architecture_names_exists_and_holds_the_name_given():
    text = ARCHITECTURE.read_text()
    named = sorted(set(_PATH.findall(text)))
    assert len(named) > 50  # the page names its files: the test reads them
    missing = [path for path, _ in named if not _found(path)]
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"
    absent = [
        f"{path}::{name}"
        for path, name in named
        if name
        and not any(
            re.search(
                rf"^\s*(?:def|class)\s+{re.escape(name.split('.')[-1])}\b|^{name}\b",
                p.read_text(),
                re.M,
            )
            for p in _found(path)
        )
    ]
    assert absent == [], f"docs/architecture.md names what its file does not define: {absent}"
