"""Every Python example in the library docs runs as printed, in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/library.md", "docs/deployment.md", "docs/migrating.md")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _examples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(_BLOCK.finditer((ROOT / doc).read_text()), start=1):
            found.append((f"{doc}#{number}", match.group(1)))
    return found


EXAMPLES = _examples()


def test_the_library_page_has_examples():
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_example_runs(where: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
