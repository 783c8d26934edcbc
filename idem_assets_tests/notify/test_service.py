"""The service's idempotency protocol over real HTTP: replay, 409, 422, 401, 400, durability."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from idem_assets.notify import Faults
from idem_assets_tests.checkpoint.clock import SteppedClock
from idem_assets_tests.notify.conftest import StartServer
from idem_assets_tests.notify.raw_http import (
    RawResponse,
    get_json,
    post_notification,
    request,
    wait_for_stat,
)
from idem_assets_tests.waiting import WAIT_SECONDS, wait_until

PAYLOAD = {"order_id": 42, "status": "shipped", "amount": "19.90"}


def _post_in_thread(
    url: str, token: str, key: str, payload: object
) -> tuple[threading.Thread, list]:
    results: list[RawResponse] = []
    thread = threading.Thread(
        target=lambda: results.append(post_notification(url, token, key, payload))
    )
    thread.start()
    return thread, results


def test_replay_returns_the_original_response_and_is_not_a_delivery(
    start_server: StartServer, token: str
) -> None:
    server = start_server()
    first = post_notification(server.url, token, "order-42-shipped", PAYLOAD)
    assert first.status == 201
    assert not first.replayed
    assert first.json()["idempotency_key"] == "order-42-shipped"

    # Same payload with another key order and spacing: the canonical hash is the same.
    reordered = json.dumps(dict(reversed(list(PAYLOAD.items()))), indent=2).encode()
    for body in (PAYLOAD, reordered):
        again = post_notification(server.url, token, "order-42-shipped", body)
        assert again.status == 201
        assert again.replayed
        assert again.body == first.body

    stats = get_json(server.url, token, "/v1/stats")
    assert (stats["deliveries"], stats["distinct_keys"], stats["replays"]) == (1, 1, 2)
    listing = get_json(server.url, token, "/v1/deliveries")
    assert [(row["key"], row["count"]) for row in listing["deliveries"]] == [
        ("order-42-shipped", 1)
    ]


def test_same_key_while_in_flight_gets_409_and_is_delivered_once(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(hold_in_flight=True))
    holder, held = _post_in_thread(server.url, token, "k-in-flight", PAYLOAD)
    wait_for_stat(server.url, token, "in_flight", 1)

    second = post_notification(server.url, token, "k-in-flight", PAYLOAD)
    assert second.status == 409
    assert second.json()["error"] == "in_flight"
    assert second.headers["retry-after"] == "1"
    assert holder.is_alive()  # held in flight until released, however slow the machine

    server.set_faults(Faults())
    wait_until(lambda: not holder.is_alive(), "the first request's answer", seen=held.copy)
    assert held[0].status == 201 and not held[0].replayed
    retry = post_notification(server.url, token, "k-in-flight", PAYLOAD)
    assert retry.status == 201 and retry.replayed and retry.body == held[0].body
    stats = get_json(server.url, token, "/v1/stats")
    assert (stats["deliveries"], stats["conflicts"], stats["in_flight"]) == (1, 1, 0)


def test_hold_after_delivers_that_many_then_holds_the_next_until_released(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(hold_after=2))
    first = [post_notification(server.url, token, f"k-before-{n}", PAYLOAD) for n in range(2)]
    assert [r.status for r in first] == [201, 201]
    holder, held = _post_in_thread(server.url, token, "k-held", PAYLOAD)
    wait_for_stat(server.url, token, "in_flight", 1)
    assert holder.is_alive()  # the third request is held, however fast the machine
    assert get_json(server.url, token, "/v1/stats")["deliveries"] == 2

    server.set_faults(Faults())
    wait_until(lambda: not holder.is_alive(), "the held request's answer", seen=held.copy)
    assert held[0].status == 201
    stats = get_json(server.url, token, "/v1/stats")
    assert (stats["deliveries"], stats["in_flight"]) == (3, 0)


def test_payload_mismatch_gets_422_and_keeps_the_original(
    start_server: StartServer, token: str
) -> None:
    server = start_server()
    first = post_notification(server.url, token, "k-mismatch", PAYLOAD)
    changed = post_notification(server.url, token, "k-mismatch", {**PAYLOAD, "amount": "20.00"})
    assert changed.status == 422
    assert changed.json()["error"] == "idempotency_key_reused"
    original = post_notification(server.url, token, "k-mismatch", PAYLOAD)
    assert original.replayed and original.body == first.body
    stats = get_json(server.url, token, "/v1/stats")
    assert (stats["deliveries"], stats["mismatches"]) == (1, 1)


def test_payload_mismatch_while_in_flight_gets_422(start_server: StartServer, token: str) -> None:
    server = start_server(faults=Faults(hold_in_flight=True))
    holder, held = _post_in_thread(server.url, token, "k-flight-mismatch", PAYLOAD)
    wait_for_stat(server.url, token, "in_flight", 1)
    changed = post_notification(server.url, token, "k-flight-mismatch", {"order_id": 7})
    server.set_faults(Faults())
    wait_until(lambda: not holder.is_alive(), "the first request's answer", seen=held.copy)
    assert changed.status == 422
    assert held[0].status == 201
    assert get_json(server.url, token, "/v1/stats")["deliveries"] == 1


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", "Basic {token}", "Bearer {token}x", "{token}", "Bearer "],
    ids=["absent", "wrong", "wrong-scheme", "longer", "no-scheme", "empty"],
)
def test_missing_or_wrong_token_gets_401_and_delivers_nothing(
    start_server: StartServer, token: str, authorization: str | None
) -> None:
    server = start_server()
    headers = [("Idempotency-Key", "k-auth")]
    if authorization is not None:
        headers.append(("Authorization", authorization.format(token=token)))
    response = request(
        server.url, "POST", "/v1/notifications", body=json.dumps(PAYLOAD).encode(), headers=headers
    )
    assert response.status == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert token.encode() not in response.body
    assert request(server.url, "GET", "/v1/stats").status == 401
    stats = server.stats()
    assert (stats["deliveries"], stats["in_flight"], stats["unauthorized"]) == (0, 0, 2)


@pytest.mark.parametrize(
    ("key_headers", "body", "message"),
    [
        ([], json.dumps(PAYLOAD).encode(), "Idempotency-Key is required"),
        ([("Idempotency-Key", "")], json.dumps(PAYLOAD).encode(), "Idempotency-Key is required"),
        ([("Idempotency-Key", "x" * 256)], json.dumps(PAYLOAD).encode(), "256 characters"),
        ([("Idempotency-Key", "a b")], json.dumps(PAYLOAD).encode(), "may only contain"),
        ([("Idempotency-Key", "a/b")], json.dumps(PAYLOAD).encode(), "may only contain"),
        ([("Idempotency-Key", "a"), ("Idempotency-Key", "b")], b"{}", "exactly one"),
        ([("Idempotency-Key", "k")], b"{not json", "not valid JSON"),
        ([("Idempotency-Key", "k")], b"\xff\xfe", "not valid JSON"),
        ([("Idempotency-Key", "k")], b"[1, 2]", "must be a JSON object"),
        ([("Idempotency-Key", "k")], b'{"amount": NaN}', "not valid JSON"),
    ],
    ids=[
        "absent",
        "empty",
        "too-long",
        "space",
        "slash",
        "twice",
        "bad-json",
        "not-utf8",
        "array",
        "nan",
    ],
)
def test_bad_key_or_body_gets_400_naming_the_problem(
    start_server: StartServer,
    token: str,
    key_headers: list[tuple[str, str]],
    body: bytes,
    message: str,
) -> None:
    server = start_server()
    headers = [("Authorization", f"Bearer {token}"), *key_headers]
    response = request(server.url, "POST", "/v1/notifications", body=body, headers=headers)
    assert response.status == 400
    assert message in response.json()["message"]
    stats = server.stats()
    assert (stats["deliveries"], stats["in_flight"], stats["bad_requests"]) == (0, 0, 1)


def test_oversized_body_gets_413(start_server: StartServer, token: str) -> None:
    server = start_server()
    response = post_notification(server.url, token, "k-big", {"blob": "x" * 70_000})
    assert response.status == 413
    assert server.stats()["deliveries"] == 0


def test_keys_responses_and_counts_survive_a_restart(
    start_server: StartServer, token: str, db_path: Path
) -> None:
    first_server = start_server()
    original = post_notification(first_server.url, token, "k-durable", PAYLOAD)
    assert post_notification(first_server.url, token, "k-durable", PAYLOAD).replayed
    first_server.stop()

    second_server = start_server()
    replay = post_notification(second_server.url, token, "k-durable", PAYLOAD)
    assert replay.status == 201 and replay.replayed and replay.body == original.body
    assert post_notification(second_server.url, token, "k-durable", {"x": 1}).status == 422
    fresh = post_notification(second_server.url, token, "k-after-restart", PAYLOAD)
    assert fresh.status == 201 and not fresh.replayed
    stats = get_json(second_server.url, token, "/v1/stats")
    assert (stats["deliveries"], stats["replays"], stats["mismatches"]) == (2, 2, 1)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_abandoned_in_flight_key_is_taken_over_and_the_late_holder_cannot_deliver(
    start_server: StartServer, token: str
) -> None:
    # The in-flight timeout runs on the test's clock; the hang is real time, long enough
    # for the takeover to come first however loaded the machine is.
    clock = SteppedClock()
    server = start_server(
        faults=Faults(hang_rate=1.0, hang_seconds=5.0), in_flight_timeout_seconds=30.0, clock=clock
    )
    holder_errors: list[BaseException] = []

    def hold() -> None:
        try:
            post_notification(server.url, token, "k-abandoned", PAYLOAD, timeout=0.2)
        except TimeoutError as exc:
            holder_errors.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    wait_for_stat(server.url, token, "in_flight", 1)
    holder.join()
    assert len(holder_errors) == 1, "the hung request should have timed out on the client"
    server.set_faults(Faults())
    clock.advance(29.9)
    fresh = post_notification(server.url, token, "k-abandoned", PAYLOAD)
    assert fresh.status == 409, "a fresh in-flight marker must not be taken over"
    clock.advance(0.1)
    taker = post_notification(server.url, token, "k-abandoned", PAYLOAD)
    assert taker.status == 201 and not taker.replayed
    # The hung original wakes up after its 5 s, finds its claim gone and answers 409
    # undelivered.
    stats = wait_for_stat(server.url, token, "conflicts", 2)
    assert (stats["deliveries"], stats["takeovers"], stats["hangs"]) == (1, 1, 1)
    listing = get_json(server.url, token, "/v1/deliveries")["deliveries"]
    assert [(row["key"], row["count"]) for row in listing] == [("k-abandoned", 1)]


def test_stop_during_a_hang_abandons_the_key_like_a_crash(
    start_server: StartServer, token: str
) -> None:
    clock = SteppedClock()
    # A hang far longer than any stop under load: a stop that waited for it could not pass.
    server = start_server(
        faults=Faults(hang_rate=1.0, hang_seconds=3600), in_flight_timeout_seconds=0.5, clock=clock
    )
    with pytest.raises(TimeoutError):
        post_notification(server.url, token, "k-stopped", PAYLOAD, timeout=0.3)
    began = time.monotonic()
    server.stop()
    took = time.monotonic() - began
    assert took < WAIT_SECONDS, f"stop() took {took:.0f} s: it waited for the 3600 s hang"

    restarted = start_server(in_flight_timeout_seconds=0.5, clock=clock)
    stats = restarted.stats()
    assert (stats["in_flight"], stats["deliveries"]) == (1, 0)
    assert post_notification(restarted.url, token, "k-stopped", PAYLOAD).status == 409
    clock.advance(0.5)
    taker = post_notification(restarted.url, token, "k-stopped", PAYLOAD)
    assert taker.status == 201 and not taker.replayed
    assert restarted.stats()["takeovers"] == 1
    assert restarted.service.store.delivery_counts()[0]["count"] == 1


def test_admin_faults_are_validated_and_applied(start_server: StartServer, token: str) -> None:
    server = start_server()
    auth = [("Authorization", f"Bearer {token}")]

    def post_faults(body: dict, headers: list[tuple[str, str]] = auth) -> RawResponse:
        return request(
            server.url, "POST", "/v1/admin/faults", body=json.dumps(body).encode(), headers=headers
        )

    assert post_faults({"error_rate": 1.0}, headers=[]).status == 401
    too_high = post_faults({"error_rate": 1.5})
    assert too_high.status == 400 and "error_rate" in too_high.json()["message"]
    unknown = post_faults({"eror_rate": 0.5})
    assert unknown.status == 400 and "eror_rate" in unknown.json()["message"]
    assert post_faults({"latency_ms": "slow"}).status == 400
    applied = post_faults({"error_rate": 1.0, "seed": 3})
    assert applied.status == 200 and applied.json()["faults"]["error_rate"] == 1.0
    assert get_json(server.url, token, "/v1/admin/faults")["faults"]["seed"] == 3
    failed = post_notification(server.url, token, "k-faulted", PAYLOAD)
    assert failed.status == 503
    assert server.stats()["injected_errors_before_delivery"] == 1


def test_routes_health_and_query_validation(start_server: StartServer, token: str) -> None:
    server = start_server()
    assert request(server.url, "GET", "/healthz").json() == {"status": "ok"}
    auth = [("Authorization", f"Bearer {token}")]
    assert request(server.url, "GET", "/v1/nope", headers=auth).status == 404
    wrong_method = request(server.url, "GET", "/v1/notifications", headers=auth)
    assert wrong_method.status == 405 and wrong_method.headers["allow"] == "POST"
    for bad in ("0", "abc", "-1"):
        response = request(server.url, "GET", f"/v1/deliveries?min_count={bad}", headers=auth)
        assert response.status == 400 and "min_count" in response.json()["message"]
