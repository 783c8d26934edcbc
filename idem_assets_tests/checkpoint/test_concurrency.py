"""Several worker processes drain one scope: each record is claimed once per attempt."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from idem_assets.checkpoint import Status, open_store
from idem_assets_tests.checkpoint.worker import planned_failure, spawn

SCOPE = "notifications/2024-03-01"
RECORDS = 2_000


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 4])
def test_workers_split_a_scope_exactly_once(store_url: str, tmp_path: Path, workers: int) -> None:
    record_ids = [f"rec-{n:05d}" for n in range(RECORDS)]
    with open_store(store_url) as store:
        assert store.register(SCOPE, [(r, {"n": n}) for n, r in enumerate(record_ids)]) == RECORDS

    go_file = tmp_path / "go"
    logs = {f"worker-{n}": tmp_path / f"worker-{n}.log" for n in range(workers)}
    ready = [tmp_path / f"{owner}.ready" for owner in logs]
    processes = [
        spawn(
            {
                "mode": "drain",
                "url": store_url,
                "scope": SCOPE,
                "owner": owner,
                "log": str(log),
                "batch": 10,
                "work_seconds": 0.001,
                "go_file": str(go_file),
                "ready_file": str(ready_file),
            }
        )
        for (owner, log), ready_file in zip(logs.items(), ready, strict=True)
    ]
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in ready):
        assert all(p.poll() is None for p in processes), "a worker exited before the start"
        assert time.monotonic() < deadline, "workers never became ready"
        time.sleep(0.01)
    go_file.touch()  # every worker starts claiming at the same moment
    assert [process.wait(timeout=300) for process in processes] == [0] * workers

    claims: Counter[tuple[str, int]] = Counter()
    successes: dict[str, list[str]] = {}
    claimed_by: Counter[str] = Counter()
    for owner, log in logs.items():
        for line in log.read_text().splitlines():
            event, record_id, attempt = line.split()
            if event == "claim":
                claims[(record_id, int(attempt))] += 1
                claimed_by[owner] += 1
            else:
                successes.setdefault(record_id, []).append(owner)

    expected = {(r, 1) for r in record_ids} | {(r, 2) for r in record_ids if planned_failure(r)}
    assert set(claims) == expected
    assert [key for key, count in claims.items() if count != 1] == []
    assert sorted(successes) == record_ids
    assert [r for r, owners in successes.items() if len(owners) != 1] == []
    assert all(claimed_by[owner] > 0 for owner in logs), f"a worker got nothing: {claimed_by}"

    with open_store(store_url) as store:
        assert store.counts(SCOPE)["succeeded"] == RECORDS
        trackers = store.list(SCOPE)
    assert all(t.status is Status.SUCCEEDED for t in trackers)
    assert {t.record_id: t.result["by"] for t in trackers} == {
        r: owners[0] for r, owners in successes.items()
    }
    assert {t.record_id: t.attempts for t in trackers} == {
        r: 2 if planned_failure(r) else 1 for r in record_ids
    }
