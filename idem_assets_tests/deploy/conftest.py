"""Fixtures: a real S3-compatible server (moto in server mode) on 127.0.0.1."""

from __future__ import annotations

import secrets
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the local S3 server; credentials live only in the environment."""

    endpoint: str
    name: str
    credentials: dict[str, str]

    def client(self):  # noqa: ANN201 - boto3 clients are generated types
        """A boto3 client with the test's generated credentials."""
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"],
        )

    def keys(self, prefix: str) -> list[str]:
        """Object keys under ``prefix``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=prefix
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 API served over HTTP on a free loopback port for the session."""
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


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
    bucket = S3Bucket(endpoint=s3_endpoint, name=f"lake-{uuid.uuid4().hex[:12]}",
                      credentials=dict(aws_env))
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket
