"""Fault injection really produces the configured failures, reproducibly for a seed."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from idem_assets.notify import Faults
from idem_assets.notify.faults import FaultInjector
from idem_assets_tests.notify.conftest import StartServer
from idem_assets_tests.notify.raw_http import get_json, post_notification
from idem_assets_tests.waiting import wait_until


def _outcomes(url: str, token: str, keys: list[str], timeout: float = 60.0) -> list[int | str]:
    """Status per key (or "timeout"), sent from 8 threads: decisions do not depend on order."""

    def send(key: str) -> int | str:
        try:
            return post_notification(url, token, key, {"key": key}, timeout=timeout).status
        except TimeoutError:
            return "timeout"

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(send, keys))


def test_error_rate_fails_that_share_before_anything_is_delivered(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(error_rate=0.3, seed=7))
    keys = [f"err-{i}" for i in range(300)]
    outcomes = _outcomes(server.url, token, keys)
    failed = {key for key, status in zip(keys, outcomes, strict=True) if status == 503}
    assert set(outcomes) == {201, 503}
    assert 0.22 * len(keys) <= len(failed) <= 0.38 * len(keys)
    delivered = {row["key"] for row in get_json(server.url, token, "/v1/deliveries")["deliveries"]}
    assert delivered == set(keys) - failed
    stats = server.stats()
    assert stats["injected_errors_before_delivery"] == len(failed)
    assert (stats["deliveries"], stats["in_flight"]) == (len(keys) - len(failed), 0)


def test_error_after_delivery_delivers_stores_and_still_answers_5xx(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(error_after_delivery_rate=0.4, seed=3))
    keys = [f"after-{i}" for i in range(200)]
    outcomes = _outcomes(server.url, token, keys)
    ambiguous = [key for key, status in zip(keys, outcomes, strict=True) if status == 502]
    assert set(outcomes) == {201, 502}
    assert 0.32 * len(keys) <= len(ambiguous) <= 0.48 * len(keys)
    # Every key was delivered exactly once, including those answered with 502.
    counts = {
        row["key"]: row["count"]
        for row in get_json(server.url, token, "/v1/deliveries")["deliveries"]
    }
    assert counts == dict.fromkeys(keys, 1)
    server.set_faults(Faults())
    replay = post_notification(server.url, token, ambiguous[0], {"key": ambiguous[0]})
    assert replay.status == 201 and replay.replayed
    assert server.stats()["injected_errors_after_delivery"] == len(ambiguous)


def test_hangs_stall_past_the_client_timeout_at_the_configured_rate(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(hang_rate=0.5, hang_seconds=1.5, seed=5))
    keys = [f"hang-{i}" for i in range(48)]
    # Timeout well above a normal answer under load, well below the hang.
    outcomes = _outcomes(server.url, token, keys, timeout=0.75)
    timeouts = outcomes.count("timeout")
    assert set(outcomes) == {201, "timeout"}
    assert 0.3 * len(keys) <= timeouts <= 0.7 * len(keys)
    stats = server.stats()
    assert stats["hangs"] == timeouts
    # Hung requests finish their delivery once the hang ends.
    wait_until(
        lambda: server.stats()["deliveries"] >= len(keys),
        f"all {len(keys)} deliveries once the hangs end",
        seen=server.stats,
    )
    assert server.stats()["deliveries"] == len(keys)


def test_latency_and_jitter_delay_each_new_delivery(start_server: StartServer, token: str) -> None:
    faults = Faults(latency_ms=200, latency_jitter_ms=100, seed=1)
    server = start_server(faults=faults)
    # The delays the server draws: the same seed, key and request number give the same plan.
    planned = [FaultInjector(faults).plan(f"slow-{i}").delay_seconds for i in range(5)]
    assert all(0.2 <= delay <= 0.3 for delay in planned), planned
    assert max(planned) - min(planned) > 0.005, "jitter should vary the delay"
    for i, delay in enumerate(planned):
        began = time.monotonic()
        assert post_notification(server.url, token, f"slow-{i}", {"i": i}).status == 201
        took = time.monotonic() - began
        # At least the drawn delay; the bound above only catches a wrong unit (seconds),
        # far above what load adds to one answer.
        assert delay <= took < delay + 120, (delay, took)


def test_same_seed_gives_the_same_failures_and_another_seed_does_not(
    tmp_path: Path, start_server: StartServer, token: str
) -> None:
    keys = [f"seeded-{i}" for i in range(60)]
    runs = []
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        server = start_server(
            db_path=tmp_path / f"{name}.sqlite3", faults=Faults(error_rate=0.5, seed=seed)
        )
        runs.append(_outcomes(server.url, token, keys))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"error_rate": 1.5}, "error_rate must be between 0 and 1"),
        ({"hang_rate": -0.1}, "hang_rate must be between 0 and 1"),
        ({"latency_ms": float("inf")}, "latency_ms must be >= 0"),
        ({"hang_seconds": float("nan")}, "hang_seconds must be >= 0"),
        ({"error_after_delivery_rate": "0.5"}, "must be a number"),
        ({"seed": 1.5}, "seed must be an integer"),
        ({"hold_in_flight": "yes"}, "hold_in_flight must be true or false"),
        ({"hold_after": -1}, "hold_after must be >= 0"),
        ({"hold_after": "2"}, "hold_after must be an integer"),
    ],
)
def test_invalid_faults_are_refused_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Faults(**fields)


def test_faults_from_mapping_refuses_unknown_fields_and_keeps_the_rest() -> None:
    base = Faults(error_rate=0.2, seed=9)
    assert Faults.from_mapping({"latency_ms": 5}, base=base) == Faults(
        error_rate=0.2, latency_ms=5, seed=9
    )
    with pytest.raises(ValueError, match="unknown fault field"):
        Faults.from_mapping({"hang_rates": 0.1})
