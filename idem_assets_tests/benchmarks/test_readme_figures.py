"""``python -m benchmarks.cases.readme_figures``: the README's figures as a reader runs them.

The README's "Years of history" block is what the command runs (one year as written, the
whole history its comment names), each measurement carries the load around it, and
``--busy`` really takes the cores and gives them back.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cases.readme_figures import (
    README,
    busy,
    history_block,
    measure,
    terminal_env,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_history_figure_runs_the_readmes_block_one_year_as_written_all_of_it_when_asked():
    year, whole = history_block(README, whole=False), history_block(README, whole=True)
    timed = [line for line in year if line.startswith(("python -m idem_assets.sample", "dg "))]
    assert len(timed) == 3 and "--days $HISTORY_DAYS " in timed[0]
    assert all("1992-01-01...$HISTORY_LAST" in line for line in timed[1:])
    assert any(line.startswith("HISTORY_DAYS=366 HISTORY_LAST=1992-12-31 ") for line in year)
    assert any(line.startswith("HISTORY_DAYS=2406 HISTORY_LAST=1998-08-02 ") for line in whole)
    # Only the size differs between the two.
    assert sum(a != b for a, b in zip(year, whole, strict=True)) == 1


def test_a_measurement_is_the_commands_own_time_and_cpu_with_the_load_around_it(tmp_path):
    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    done = measure(
        "probe",
        "first run",
        [sys.executable, "-c", spin],
        tmp_path,
        terminal_env(tmp_path, activated=False),
        tmp_path / "probe.log",
        "python -c spin",
    )
    assert done.code == 0 and done.command == "python -c spin"
    assert done.cpu >= 0.3 and done.seconds >= done.cpu * 0.5
    assert len(done.load_start) == len(done.load_end) == 3
    assert all(value >= 0 for value in (*done.load_start, *done.load_end))


def test_busy_takes_the_cores_meanwhile_and_stops_its_processes(tmp_path):
    with busy(2, settle=0.0) as spinning:
        assert len(spinning) == 2 and all(child.poll() is None for child in spinning)
        stat = [Path(f"/proc/{child.pid}/stat").read_text().split() for child in spinning]
    assert all(child.poll() is not None for child in spinning)
    assert all(fields[2] in "RS" for fields in stat)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_command_prints_each_figure_with_its_load_and_the_readme_block_succeeds():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cases.readme_figures"]
        + ["--only", "launch_one", "--only", "history_year"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| launch_one")]
    rows += [line for line in done.stdout.splitlines() if line.startswith("| history_year")]
    assert len(rows) == 5, done.stdout
    load = r"\d+\.\d\d / \d+\.\d\d / \d+\.\d\d"
    for row in rows:
        assert re.search(rf"\| \d+\.\d \| \d+\.\d \| 0 \| {load} \| {load} \|$", row), row
    assert "`dg launch --assets orders --partition " in rows[0]
    assert [row.split(" | ")[2] for row in rows[2:]] == [
        "landing files",
        "first run",
        "unchanged rerun",
    ]
