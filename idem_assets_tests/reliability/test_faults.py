"""The crash-injection hook: off unless armed, read at call time, kills at the N-th hit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from idem_assets.faults import CRASH_ENV, CRASH_MARKER, crash_point, crash_target

PROGRAM = """
import os
from idem_assets.faults import crash_point
crash_point("lake.after_commit/orders")          # not armed yet: nothing happens
os.environ["IDEM_CRASH_AT"] = "outbox.before_send:2"
crash_point("lake.after_commit/orders")          # another point
crash_point("outbox.before_send")                # first hit
print("survived hit 1", flush=True)
crash_point("outbox.before_send")                # second hit: dies here
print("survived hit 2", flush=True)
"""


def test_armed_at_call_time_and_killed_at_the_nth_hit():
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.splitlines() == ["survived hit 1"]
    assert done.stderr.startswith(f"{CRASH_MARKER} outbox.before_send:2 pid=")


def test_unarmed_or_other_points_do_nothing(monkeypatch):
    monkeypatch.delenv(CRASH_ENV, raising=False)
    crash_point("lake.before_write/orders")
    monkeypatch.setenv(CRASH_ENV, "lake.before_write/events")
    crash_point("lake.before_write/orders")


@pytest.mark.parametrize(
    ("value", "target"),
    [
        ("lake.after_commit/orders", ("lake.after_commit/orders", 1)),
        ("outbox.sent_unsettled:3", ("outbox.sent_unsettled", 3)),
        ("stream.committed:x", ("stream.committed:x", 1)),
    ],
)
def test_the_variable_names_a_point_and_a_hit(value, target, monkeypatch):
    monkeypatch.setenv(CRASH_ENV, value)
    assert crash_target() == target


def test_a_zero_hit_is_refused(monkeypatch):
    monkeypatch.setenv(CRASH_ENV, "outbox.before_send:0")
    with pytest.raises(ValueError, match="1 or more"):
        crash_target()
