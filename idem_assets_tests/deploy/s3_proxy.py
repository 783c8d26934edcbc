"""A fault-injecting HTTP proxy in front of the local S3 server, in its own process.

``python -m idem_assets_tests.deploy.s3_proxy UPSTREAM PORT CONTROL_FILE`` forwards every
request to UPSTREAM and, per request, reads the faults to inject from CONTROL_FILE (JSON,
rewritten by the test at any time):

- ``error_rate``: answer 503 SlowDown without forwarding;
- ``drop_rate``: close the connection without an answer, without forwarding;
- ``cut_rate``: forward, then send the status, the headers (with the full Content-Length)
  and half of the body, and close the connection: an answer cut mid-body, as a reset
  connection or a dying load balancer leaves it (only answers with a body of 2+ bytes);
- ``cut_first``: cut the first that many answers with a body, whatever the rates;
- ``delay_ms``: wait this long before forwarding;
- ``lose_commit_responses``: for that many PUTs of a Delta log entry
  (``_delta_log/<version>.json``), forward the PUT (the object is written) and then close
  the connection: the commit landed, the writer never hears it (the ambiguous commit);
- ``before_get``: a list of ``{"match": regex, "action": "replace" | "delete", "body": text,
  "access_key_id": ..., "secret_access_key": ...}``: the first GET whose (unquoted) path
  matches first replaces the object upstream with ``body`` (or deletes it, signed with the
  credentials given), then is forwarded: an object changed between a listing and its read;
- ``log_requests``: log every request (method, path and Range header), to count what a
  client fetched.

Draws are seeded (``seed``) so a failing run repeats. Each injected fault is appended to
``CONTROL_FILE.log`` as one JSON line. A separate process, because delta-rs holds the GIL
while it waits for the network: a proxy thread in the test's interpreter could not answer.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

_LOG_ENTRY = re.compile(r"/_delta_log/\d{20}\.json$")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class Control:
    """The faults, read from the control file; shared by the proxy's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.rng = random.Random(0)
        self.seed: object = None
        self.lost = 0
        self.cut = 0
        self.mutated: set[int] = set()

    def faults(self) -> dict[str, Any]:
        """The current settings (empty when the file is missing or half-written)."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if data.get("seed") != self.seed:
            self.seed = data.get("seed")
            self.rng = random.Random(self.seed)
            self.lost = 0
            self.cut = 0
            self.mutated = set()
        return data

    def draw(self) -> float:
        """A seeded number in [0, 1)."""
        return self.rng.random()

    def note(self, fault: str, method: str, path: str, range_: str | None = None) -> None:
        """Log one injected fault."""
        entry = {"fault": fault, "method": method, "path": path, "at": time.time()}
        if range_:
            entry["range"] = range_
        line = json.dumps(entry)
        with (self.path.parent / f"{self.path.name}.log").open("a") as out:
            out.write(line + "\n")


def handler_for(upstream: str, control: Control) -> type[BaseHTTPRequestHandler]:
    """A request handler forwarding to ``upstream`` with the control file's faults."""
    target = urlsplit(upstream)

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: without this, the body waits for the
        # client's delayed ACK (Nagle), about 40 ms a request.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            return

        def _forward(self) -> None:
            with control.lock:
                faults = control.faults()
                error = control.draw() < float(faults.get("error_rate", 0.0))
                drop = control.draw() < float(faults.get("drop_rate", 0.0))
                cut_rate = float(faults.get("cut_rate", 0.0))
                # Drawn only when asked for, so older seeds keep their sequences of faults.
                cut = cut_rate > 0 and control.draw() < cut_rate
                lose = (
                    self.command == "PUT"
                    and _LOG_ENTRY.search(urlsplit(self.path).path) is not None
                    and control.lost < int(faults.get("lose_commit_responses", 0))
                )
                if lose:
                    control.lost += 1
                mutation = None
                if self.command == "GET":
                    for index, rule in enumerate(faults.get("before_get", [])):
                        path = unquote(urlsplit(self.path).path)
                        if index not in control.mutated and re.search(rule["match"], path):
                            control.mutated.add(index)
                            mutation = rule
                            break
            if faults.get("log_requests"):
                control.note("request", self.command, self.path, self.headers.get("Range"))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if mutation is not None:
                _mutate(upstream, urlsplit(self.path).path, mutation)
                control.note(f"{mutation['action']} before get", self.command, self.path)
            delay = float(faults.get("delay_ms", 0.0))
            if delay:
                time.sleep(delay / 1000)
            if drop and not lose:
                control.note("drop", self.command, self.path)
                self.close_connection = True
                return
            if error and not lose:
                control.note("503", self.command, self.path)
                payload = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            conn.close()
            if lose:
                control.note(f"lost response {response.status}", self.command, self.path)
                self.close_connection = True
                return
            self.send_response(response.status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if len(data) >= 2 and not cut:
                with control.lock:
                    if control.cut < int(faults.get("cut_first", 0)):
                        control.cut += 1
                        cut = True
            if cut and len(data) >= 2:
                control.note("cut", self.command, self.path, self.headers.get("Range"))
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Proxy


def _mutate(upstream: str, path: str, rule: dict[str, Any]) -> None:
    """Replace or delete the object at ``path`` (path-style) upstream, signed with the
    rule's credentials: the server refuses an anonymous overwrite of someone's object."""
    import boto3

    bucket, _, key = unquote(path).lstrip("/").partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=upstream,
        region_name="us-east-1",
        aws_access_key_id=rule["access_key_id"],
        aws_secret_access_key=rule["secret_access_key"],
    )
    if rule["action"] == "delete":
        client.delete_object(Bucket=bucket, Key=key)
    else:
        client.put_object(Bucket=bucket, Key=key, Body=str(rule.get("body", "")).encode())


def main(upstream: str, port: int, control_file: str) -> None:
    """Serve until killed."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", port), handler_for(upstream, Control(Path(control_file)))
    )
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
