"""Fixtures: a real gRPC server on a loopback port, and clients connected to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gnau_client import GnauClient, RetryPolicy

from tests.clients.fakes import FakeServer, start_fake_server

# Short backoffs keep the retry tests fast; the policy is otherwise the default one.
FAST_RETRY = RetryPolicy(initial_backoff=0.01, max_backoff=0.05)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = start_fake_server()
    yield server
    server.server.stop(grace=None)


@pytest.fixture
def client(fake: FakeServer) -> Iterator[GnauClient]:
    with GnauClient(fake.target, token="s3cret-token", retry=FAST_RETRY) as client:
        yield client
