"""HTTP plumbing of the notification service: routes, auth, request parsing, safe logging."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from idem_assets.notify.faults import Faults
from idem_assets.notify.keys import key_problem
from idem_assets.notify.protocol import REPLAYED_HEADER, NotificationService, Reply, error_reply

logger = logging.getLogger("idem_assets.notify.service")

MAX_BODY_BYTES = 64 * 1024


class BadRequest(Exception):
    """A request the service refuses with a 4xx and a message naming the problem."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.reply = error_reply(status, error, message)


class NotificationHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that hands its NotificationService to the request handlers."""

    daemon_threads = True
    # The default backlog of 5 drops connections from a burst of concurrent workers, and the
    # kernel then retries them only after a second, which looks like a hang to a client.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], service: NotificationService) -> None:
        self.service = service
        super().__init__(address, NotificationRequestHandler)


class NotificationRequestHandler(BaseHTTPRequestHandler):
    """Routes requests; logs method, path, status and key only (never headers or tokens)."""

    server: NotificationHTTPServer
    server_version = "idem-notify/1"

    def version_string(self) -> str:
        """The Server header: the service name only, no Python version."""
        return self.server_version

    def do_GET(self) -> None:
        """Dispatch a GET."""
        self._dispatch("GET")

    def do_POST(self) -> None:
        """Dispatch a POST."""
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        self.idempotency_key: str | None = None
        path = urlsplit(self.path).path
        routes = _ROUTES.get(path)
        try:
            body = self._read_body() if method == "POST" else b""
            if routes is None:
                reply = error_reply(404, "not_found", f"no endpoint {path[:100]!r}")
            elif method not in routes:
                allowed = ", ".join(sorted(routes))
                reply = error_reply(405, "method_not_allowed", f"use {allowed}", Allow=allowed)
            elif path != "/healthz" and not self.server.service.authorized(
                self.headers.get("Authorization")
            ):
                self.server.service.store.count("unauthorized")
                reply = error_reply(
                    401,
                    "unauthorized",
                    "missing or wrong bearer token",
                    **{"WWW-Authenticate": "Bearer"},
                )
            else:
                reply = routes[method](self, body)
        except BadRequest as exc:
            self.server.service.store.count("bad_requests")
            reply = exc.reply
        except Exception:
            # Request boundary: answer 500 (retryable for clients) instead of dropping the
            # connection; the traceback holds code lines, not header values.
            logger.exception("%s %s failed", method, path)
            reply = error_reply(500, "internal_error", "the service failed to handle the request")
        self._send(method, path, reply)

    def _read_body(self) -> bytes:
        # The body is read before answering anything: closing a socket with unread bytes
        # resets the connection and the client would lose the response.
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            raise BadRequest(400, "bad_request", "Content-Length is not an integer") from None
        if length < 0:
            raise BadRequest(400, "bad_request", "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise BadRequest(
                413, "payload_too_large", f"body is {length} bytes, limit {MAX_BODY_BYTES}"
            )
        return self.rfile.read(length)

    def _send(self, method: str, path: str, reply: Reply) -> None:
        key = self.idempotency_key or "-"
        if reply.abort:
            self.close_connection = True
            logger.info("%s %s aborted key=%s", method, path, key)
            return
        body = reply.body.encode("utf-8")
        # Logged before the response is written, so whoever has seen the response can rely on
        # the line being in the log.
        replayed = " replayed" if REPLAYED_HEADER in reply.headers else ""
        logger.info("%s %s %d key=%s%s", method, path, reply.status, key, replayed)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            logger.info("%s %s key=%s: client gone before the response", method, path, key)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Silenced: ``_send`` logs each request with its idempotency key instead."""

    def log_message(self, format: str, *args: Any) -> None:
        """Route the base class's messages (malformed requests) to logging, not stderr."""
        logger.info("%s %s", self.address_string(), format % args)


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    """The body parsed as a JSON object, or a 400 naming what was wrong."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(400, "invalid_json", f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest(400, "invalid_json", f"{what} must be a JSON object")
    return value


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON: refuse them instead of storing an unhashable payload."""
    raise BadRequest(400, "invalid_json", f"body is not valid JSON: {name} is not allowed")


def _json_reply(value: Any, status: int = 200) -> Reply:
    return Reply(status, json.dumps(value, separators=(",", ":")))


def _post_notification(handler: NotificationRequestHandler, body: bytes) -> Reply:
    keys = handler.headers.get_all("Idempotency-Key") or []
    if len(keys) > 1:
        raise BadRequest(400, "invalid_idempotency_key", "send exactly one Idempotency-Key")
    key = keys[0] if keys else None
    problem = key_problem(key)
    if problem is not None:
        raise BadRequest(400, "invalid_idempotency_key", problem)
    assert key is not None
    handler.idempotency_key = key
    payload = _json_object(body, "notification body")
    return handler.server.service.notify(key, payload)


def _get_faults(handler: NotificationRequestHandler, body: bytes) -> Reply:
    return _json_reply({"faults": handler.server.service.injector.faults.to_dict()})


def _post_faults(handler: NotificationRequestHandler, body: bytes) -> Reply:
    injector = handler.server.service.injector
    try:
        faults = Faults.from_mapping(_json_object(body, "faults body"), base=injector.faults)
    except (TypeError, ValueError) as exc:
        raise BadRequest(400, "invalid_faults", str(exc)) from None
    injector.replace(faults)
    logger.info("faults now %s", faults.to_dict())
    return _json_reply({"faults": faults.to_dict()})


def _get_stats(handler: NotificationRequestHandler, body: bytes) -> Reply:
    return _json_reply(handler.server.service.store.stats())


def _get_deliveries(handler: NotificationRequestHandler, body: bytes) -> Reply:
    query = parse_qs(urlsplit(handler.path).query)
    raw = query.get("min_count", ["1"])[-1]
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequest(400, "bad_request", "min_count must be a positive integer")
    rows = handler.server.service.store.delivery_counts(int(raw))
    return _json_reply({"keys": len(rows), "deliveries": rows})


def _get_health(handler: NotificationRequestHandler, body: bytes) -> Reply:
    return _json_reply({"status": "ok"})


Route = Callable[[NotificationRequestHandler, bytes], Reply]
_ROUTES: dict[str, dict[str, Route]] = {
    "/healthz": {"GET": _get_health},
    "/v1/notifications": {"POST": _post_notification},
    "/v1/stats": {"GET": _get_stats},
    "/v1/deliveries": {"GET": _get_deliveries},
    "/v1/admin/faults": {"GET": _get_faults, "POST": _post_faults},
}
