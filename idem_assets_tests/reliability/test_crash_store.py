"""SIGKILL a process in the middle of checkpoint store writes, many times: the store holds up."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets_tests.checkpoint.clock import lease_lead, stepped_past_leases
from idem_assets_tests.reliability.hammer import BATCH_SIZE, PLANNED_ERROR, settle
from idem_assets_tests.reliability.world import PROJECT_ROOT, record_row

pytestmark = pytest.mark.slow

SCOPE = "hammer"
KILLS = 30
BATCHES = 5000


def violations(db: Path) -> tuple[list[str], Counter[str]]:
    """Broken invariants of the hammer's trackers, and the number of records per batch."""
    with sqlite3.connect(db) as conn:
        problems = (
            []
            if conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            else ["integrity_check failed"]
        )
        rows = conn.execute(
            "SELECT record_id, status, attempts, max_attempts, lease_token, lease_expires_at, "
            "next_attempt_at, last_error, result FROM checkpoint_trackers WHERE scope = ?",
            (SCOPE,),
        ).fetchall()
    batches: Counter[str] = Counter()
    for record_id, status, attempts, max_attempts, token, expires, due, error, result in rows:
        batches[record_id.split("-")[0]] += 1
        held = status == Status.IN_PROGRESS.value
        checks = {
            "attempts within budget": 0 <= attempts <= max_attempts,
            "a lease exactly while in progress": held == (expires is not None),
            "in progress has a token": not held or token is not None,
            "due time unless settled": (status in ("succeeded", "exhausted", "ignored"))
            == (due is None),
        }
        if status == Status.SUCCEEDED.value:
            settled = json.loads(result)
            checks["succeed applied with its claim"] = settled == {
                "token": token,
                "attempts": attempts,
            }
        elif status == Status.FAILED.value:
            checks["fail applied with its claim"] = attempts == 1 and error == PLANNED_ERROR
        elif status == Status.PENDING.value:
            checks["release undid its attempt"] = attempts == 0
        elif held:
            checks["claim counted an attempt"] = attempts >= 1
        else:
            checks["only protocol statuses"] = False
        problems += [f"{record_id} ({status}): {name}" for name, ok in checks.items() if not ok]
    problems += [
        f"batch {b} has {n} of {BATCH_SIZE} records" for b, n in batches.items() if n != BATCH_SIZE
    ]
    return problems, batches


def finish(url: str) -> None:
    """Settle every record left by the last life, following the hammer's protocol."""
    released: set[str] = set()
    # On a clock where the last life's leases have run out.
    with open_store(url, clock=stepped_past_leases(url)) as store:
        while claims := store.claim(SCOPE, "finisher", lease_seconds=30):
            for claim in claims:
                settle(store, claim, released)


def test_sigkilled_store_writer_leaves_a_readable_consistent_store(tmp_path):
    db = tmp_path / "state" / "checkpoint.db"
    url = f"sqlite:///{db}"
    rng = random.Random(20240301)
    busy, ops = [], 0
    for life in range(KILLS):
        writer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "idem_assets_tests.reliability.hammer",
                url,
                SCOPE,
                str(BATCHES),
                str(lease_lead(url)),  # the last life's records are due for this one
            ],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == b"ready", f"life {life} did not start"
        time.sleep(rng.uniform(0.05, 0.3))
        writer.kill()
        assert writer.wait() == -9
        reports = [line.split() for line in writer.stdout.read().decode().splitlines()]
        if reports:
            ops += int(reports[-1][1])
            busy.append(float(reports[-1][3]))
        problems, batches = violations(db)
        assert problems == [], f"after kill {life + 1}: {problems[:10]}"
        with open_store(url) as store:  # the store opens and answers after every kill
            assert sum(store.counts(SCOPE).values()) == BATCH_SIZE * len(batches)

    finish(url)
    problems, batches = violations(db)
    with open_store(url) as store:
        statuses = store.counts(SCOPE)
    registered = BATCH_SIZE * len(batches)
    share = sum(busy) / max(1, len(busy))
    record_row(
        "crash",
        "checkpoint_store_writes",
        runs=KILLS + 1,
        faults=f"{KILLS} SIGKILLs of a writer at random moments "
        f"({share:.0%} of its time inside store calls)",
        equal=not problems and statuses["succeeded"] == registered,
        duplicates=0,
        lost=registered - statuses["succeeded"],
        transitions_before_kills=ops,
        records=registered,
    )
    assert problems == []
    assert len(batches) >= 10 and ops > 1000
    assert statuses["succeeded"] == registered
    assert share > 0.5
