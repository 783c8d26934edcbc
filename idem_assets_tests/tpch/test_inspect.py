"""``python -m idem_assets.sources inspect`` reads the laid-out TPC-H files with their YAML."""

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from idem_assets_tests.tpch.conftest import DAYS

ROOT = Path(__file__).resolve().parents[2]
LINEITEM = ROOT / "idem_assets" / "defs" / "tpch" / "lineitem" / "defs.yaml"


def inspect(landing: Path, *args: str) -> dict:
    """The inspect command's JSON summary (it must exit 0)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "idem_assets.sources",
            "inspect",
            str(LINEITEM),
            "--landing",
            str(landing),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _rows(path: Path) -> int:
    return len(io.BytesIO(gzip.decompress(path.read_bytes())).readlines()) - 1


@pytest.mark.parametrize("days", [1, DAYS], ids=["busiest_day", "whole_window"])
def test_inspect_reads_lineitem_without_quarantine(tpch_landing, days):
    landing = tpch_landing.out_dir
    files = sorted((landing / "tpch" / "lineitem").rglob("*.csv.gz"))
    if days == 1:
        busiest = max(files, key=_rows)
        start = "-".join(busiest.parent.relative_to(busiest.parents[3]).parts)
        files = [busiest]
    else:
        start = "1992-01-01"
    summary = inspect(landing, "--start", start, "--days", str(days))
    expected = sum(_rows(p) for p in files)
    assert summary["files"] == [p.relative_to(landing).as_posix() for p in files]
    assert summary["quarantined_rows"] == 0 and summary["quarantine_samples"] == []
    assert summary["raw_rows"] == summary["valid_rows"] == expected > 0
    assert set(summary["rows_breaking_rules"].values()) == {0}
    assert summary["ignored_files"] == {}
