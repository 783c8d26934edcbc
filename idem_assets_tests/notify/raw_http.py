"""Plain HTTP calls to the notification service, to assert on exact statuses and headers."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from idem_assets_tests.waiting import wait_until


@dataclass(frozen=True)
class RawResponse:
    """Status, lower-cased headers and body of one response."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    @property
    def replayed(self) -> bool:
        """True when the service answered from its stored response."""
        return self.headers.get("idempotent-replayed") == "true"


def request(
    base_url: str,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: list[tuple[str, str]] | None = None,
    timeout: float = 60.0,
) -> RawResponse:
    """One request with exactly the given headers (repeated names allowed)."""
    parts = urlsplit(base_url)
    assert parts.hostname is not None and parts.port is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.putrequest(method, path)
        for name, value in headers or []:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        raw = response.read()
        return RawResponse(response.status, {k.lower(): v for k, v in response.getheaders()}, raw)
    finally:
        conn.close()


def post_notification(
    base_url: str,
    token: str | None,
    key: str | None,
    payload: Any,
    *,
    timeout: float = 60.0,
) -> RawResponse:
    """POST /v1/notifications with a bearer token (None: no Authorization header)."""
    headers = [("Content-Type", "application/json")]
    if token is not None:
        headers.append(("Authorization", f"Bearer {token}"))
    if key is not None:
        headers.append(("Idempotency-Key", key))
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return request(
        base_url, "POST", "/v1/notifications", body=body, headers=headers, timeout=timeout
    )


def get_json(base_url: str, token: str, path: str) -> Any:
    """GET an authenticated JSON endpoint, asserting 200."""
    response = request(base_url, "GET", path, headers=[("Authorization", f"Bearer {token}")])
    assert response.status == 200, (response.status, response.body)
    return response.json()


def wait_for_stat(base_url: str, token: str, name: str, at_least: int) -> dict[str, int]:
    """Poll /v1/stats until ``name`` reaches ``at_least``; the stats then."""
    last: list[dict[str, int]] = [{}]

    def reached() -> dict[str, int] | None:
        last[0] = get_json(base_url, token, "/v1/stats")
        return last[0] if last[0][name] >= at_least else None

    return wait_until(reached, f"stat {name} to reach {at_least}", seen=lambda: last[0], every=0.02)
