"""The client against a real, faulty service: each key delivered exactly once, errors classified."""

from __future__ import annotations

import pickle
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from idem_assets.notify import (
    DeliveryError,
    DeliveryResult,
    Faults,
    NotificationClient,
    idempotency_key,
)
from idem_assets_tests.notify.conftest import StartServer
from idem_assets_tests.notify.raw_http import wait_for_stat
from idem_assets_tests.waiting import wait_until


def _client(url: str, token: str, **options: float) -> NotificationClient:
    # Unless a test times out on purpose, the timeout only has to outlast answers under load.
    settings = {
        "timeout_seconds": 60,
        "backoff_seconds": 0.005,
        "max_backoff_seconds": 0.05,
        **options,
    }
    return NotificationClient(url, token, **settings)


def _order_keys(n: int) -> list[str]:
    return [idempotency_key("test.orders.shipped", order_id) for order_id in range(n)]


def test_retries_through_30_percent_5xx_and_delivers_each_key_exactly_once(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(error_rate=0.3, seed=11))
    client = _client(server.url, token, max_retries=8)
    keys = _order_keys(60)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda k: client.send(k, {"key": k}), keys))
    assert [r.key for r in results] == keys
    assert {r.status for r in results} == {"delivered"}
    assert sum(r.attempts for r in results) == 60 + server.stats()["injected_errors"]
    assert server.stats()["injected_errors"] >= 10
    assert client.delivery_counts() == dict.fromkeys(keys, 1)


def test_concurrent_senders_of_the_same_keys_deliver_each_once(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(latency_ms=30, error_rate=0.1, seed=2))
    keys = _order_keys(30)
    clients = [_client(server.url, token, max_retries=20) for _ in range(2)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(
            pool.map(
                lambda job: job[0].send(job[1], {"key": job[1]}),
                [(client, key) for key in keys for client in clients],
            )
        )
    by_key: dict[str, list[str]] = {}
    for result in results:
        by_key.setdefault(result.key, []).append(result.status)
    assert {key: sorted(s) for key, s in by_key.items()} == dict.fromkeys(
        keys, ["already_delivered", "delivered"]
    )
    assert clients[0].delivery_counts() == dict.fromkeys(keys, 1)


def test_error_after_delivery_is_retried_and_reported_already_delivered(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(error_after_delivery_rate=1.0))
    client = _client(server.url, token)
    key = idempotency_key("test.orders.shipped", 7)
    result = client.send(key, {"order_id": 7})
    assert result.status == "already_delivered"
    assert (result.http_status, result.attempts) == (201, 2)
    assert result.body["notification_id"] == 1 and result.body["idempotency_key"] == key
    assert client.delivery_counts() == {key: 1}
    assert server.stats()["injected_errors_after_delivery"] == 1


def test_a_hang_beyond_the_client_timeout_is_retried_without_a_second_delivery(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(hang_rate=1.0, hang_seconds=1.0))
    client = _client(
        server.url, token, timeout_seconds=0.3, max_retries=12, max_backoff_seconds=0.3
    )
    key = idempotency_key("test.orders.shipped", 8)
    result = client.send(key, {"order_id": 8})
    # Attempt 1 times out; retries meet 409 while it hangs, then the stored response.
    assert result.status == "already_delivered"
    assert result.attempts >= 3
    stats = server.stats()
    assert (stats["deliveries"], stats["hangs"]) == (1, 1)
    assert stats["conflicts"] == result.attempts - 2
    assert client.delivery_counts() == {key: 1}


def test_a_key_still_in_flight_after_the_retries_is_a_retryable_error_not_a_delivery(
    start_server: StartServer, token: str
) -> None:
    server = start_server(faults=Faults(hold_in_flight=True))
    key = idempotency_key("test.orders.shipped", 9)
    first: list[DeliveryResult] = []
    holder = threading.Thread(target=lambda: first.append(_client(server.url, token).send(key, {})))
    holder.start()
    wait_for_stat(server.url, token, "in_flight", 1)
    with pytest.raises(DeliveryError) as caught:
        _client(server.url, token, max_retries=2).send(key, {})
    server.set_faults(Faults())  # the first request is answered only now
    wait_until(lambda: not holder.is_alive(), "the first send's answer", seen=first.copy)
    assert caught.value.retryable and caught.value.http_status == 409
    assert "not confirmed after 3 attempt(s)" in str(caught.value)
    assert first[0].status == "delivered"
    assert server.stats()["conflicts"] == 3
    assert server.stats()["deliveries"] == 1


def test_payload_change_under_the_same_key_is_final_and_not_retried(
    start_server: StartServer, token: str
) -> None:
    server = start_server()
    client = _client(server.url, token)
    key = idempotency_key("test.orders.shipped", 10)
    assert client.send(key, {"amount": "1.00"}).status == "delivered"
    with pytest.raises(DeliveryError) as caught:
        client.send(key, {"amount": "2.00"})
    assert not caught.value.retryable and caught.value.http_status == 422
    assert "payload changed under the same idempotency key" in str(caught.value)
    assert server.stats()["requests"] == 2


def test_wrong_token_is_final_and_not_retried(start_server: StartServer, token: str) -> None:
    server = start_server()
    with pytest.raises(DeliveryError) as caught:
        _client(server.url, "not-the-token").send("k-401", {})
    assert not caught.value.retryable and caught.value.http_status == 401
    assert server.stats()["unauthorized"] == 1


def test_invalid_key_or_payload_fails_before_any_request(
    start_server: StartServer, token: str
) -> None:
    server = start_server()
    client = _client(server.url, token)
    for bad_key in ("", "has space", "x" * 300, "line\nbreak"):
        with pytest.raises(DeliveryError, match="Idempotency-Key") as caught:
            client.send(bad_key, {})
        assert not caught.value.retryable and caught.value.http_status is None
    with pytest.raises(DeliveryError, match="not JSON-serialisable") as caught:
        client.send("k-set", {"tags": {"a", "b"}})
    assert not caught.value.retryable
    with pytest.raises(DeliveryError, match="not JSON-serialisable"):
        client.send("k-nan", {"amount": float("nan")})
    assert server.stats()["requests"] == 0


def test_delivery_error_survives_pickling() -> None:
    error = DeliveryError("HTTP 409, in flight", True, 409, key="k-1")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.retryable, copy.http_status, copy.key) == (
        "HTTP 409, in flight",
        True,
        409,
        "k-1",
    )


def test_no_server_listening_is_a_retryable_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}", "some-token", max_retries=2)
    with pytest.raises(DeliveryError) as caught:
        client.send("k-refused", {})
    assert caught.value.retryable and caught.value.http_status is None
    assert "ConnectionRefusedError" in str(caught.value)
    assert "not confirmed after 3 attempt(s)" in str(caught.value)


def test_token_never_appears_in_errors_or_logs(
    start_server: StartServer, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    wrong_token = f"{token}-wrong"
    server = start_server(faults=Faults(error_rate=0.5, hang_rate=0.2, hang_seconds=0.5, seed=4))
    client = _client(server.url, token, timeout_seconds=0.25, max_retries=1)
    errors: list[DeliveryError] = []
    for i in range(20):
        try:
            client.send(f"k-secret-{i}", {"i": i})
        except DeliveryError as exc:
            errors.append(exc)
    server.set_faults(Faults())
    client.send("k-secret-mismatch", {"i": "original"})
    for bad in (
        lambda: client.send("k-secret-mismatch", {"i": "changed"}),
        lambda: _client(server.url, wrong_token).send("k-secret-x", {}),
        lambda: _client("http://127.0.0.1:9", token, max_retries=0).send("k-secret-y", {}),
    ):
        with pytest.raises(DeliveryError) as caught:
            bad()
        errors.append(caught.value)
    with pytest.raises(ValueError) as bad_token:
        NotificationClient(server.url, f"{token}\r\nX-Injected: 1")

    assert {e.http_status for e in errors} >= {401, 422, None}
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [str(bad_token.value)]
    texts += [repr(client)] + [record.getMessage() for record in caplog.records]
    server_lines = [t for t in texts if "POST /v1/notifications 401 key=-" in t]
    assert server_lines, "the service's request log should have been captured"
    assert any("retrying in" in t for t in texts), "client retry warnings should be captured"
    for secret in (token, wrong_token):
        assert not [t for t in texts if secret in t]


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ("ftp://127.0.0.1:1", "http"),
        ("http://user:pw@127.0.0.1:1", "credentials"),
        ("http://127.0.0.1:1/?x=1", "query"),
    ],
)
def test_client_refuses_unusable_base_urls(base_url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NotificationClient(base_url, "token")
