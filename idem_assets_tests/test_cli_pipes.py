"""The package's command lines end quietly when their reader has gone (``… | head``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from idem_assets.sample.generator import generate
from idem_assets_tests.harness import START

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        [
            "idem-source",
            "inspect",
            "idem_assets/defs/orders/defs.yaml",
            "--landing",
            "{landing}",
            "--start",
            START.isoformat(),
        ],
        ["idem-landing", "days", "--landing", "{landing}"],
        ["idem-assets", "pools"],
    ],
    ids=["idem-source inspect", "idem-landing days", "idem-assets pools"],
)
def test_a_command_whose_reader_closed_the_pipe_exits_141_without_a_traceback(tmp_path, command):
    landing = tmp_path / "landing"
    generate(landing, START, 1, seed=7)
    argv = [str(BIN / command[0]), *(a.format(landing=landing) for a in command[1:])]
    # The reader end is closed before the command starts: its first write (or its final
    # flush) meets a closed pipe, every time.
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            argv, cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=300
        )
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
