"""Fixtures: a real S3-compatible server (moto in server mode) on 127.0.0.1."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

REGION = "us-east-1"
STARTUP_SECONDS = 30.0


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the local S3 server, and the test's generated credentials."""

    endpoint: str
    name: str
    credentials: dict[str, str]

    def client(self) -> Any:
        """A boto3 client with the test's generated credentials."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"],
        )

    def keys(self, prefix: str) -> list[str]:
        """Object keys under ``prefix``, sorted."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 API served over HTTP on a free loopback port, in its own process.

    Not moto's in-process ThreadedMotoServer: delta-rs reads (``DeltaTable.scan``,
    ``history``) keep the GIL while they wait for the network, so a server thread in
    the same interpreter can never answer them.
    """
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(endpoint, server, log)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _wait_until_serving(endpoint: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(
                f"moto server exited with {server.returncode}:\n"
                f"{log.read_text(errors='replace')[-2000:]}"
            )
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"moto server not serving on {endpoint} after {STARTUP_SECONDS:.0f} s")


@pytest.fixture
def aws_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Generated credentials and the endpoint in the standard AWS_* variables.

    delta-rs reads these itself when no storage options name them.
    """
    values = {
        "AWS_ACCESS_KEY_ID": f"AKIA{secrets.token_hex(8).upper()}",
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ALLOW_HTTP": "true",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def s3_bucket(s3_endpoint: str, aws_env: dict[str, str]) -> S3Bucket:
    """A new bucket per test, so tests never see each other's tables."""
    bucket = S3Bucket(
        endpoint=s3_endpoint, name=f"lake-{uuid.uuid4().hex[:12]}", credentials=dict(aws_env)
    )
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket
