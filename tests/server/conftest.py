"""A real service, started in-process on a free port, against each backend, with one token per
role; and callers that speak to it over a real channel."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from gnau.v1 import audit_pb2_grpc, dealer_pb2_grpc

from gnau_service.server.process.app import App, running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from tests.catalogued import catalogue_module_tables
from tests.postgres import SERVICE_BACKENDS, fresh_database

TOKENS = {"operator": "op-token", "auditor": "audit-token", "public": "public-token"}


@dataclass
class Service:
    app: App
    settings: Settings
    channel: grpc.aio.Channel

    @property
    def dealer(self) -> dealer_pb2_grpc.DealerServiceStub:
        return dealer_pb2_grpc.DealerServiceStub(self.channel)

    @property
    def audit(self) -> audit_pb2_grpc.AuditServiceStub:
        return audit_pb2_grpc.AuditServiceStub(self.channel)

    async def call(
        self, service: str, method: str, request: Any, role: str | None = "operator"
    ) -> Any:
        stub = self.dealer if service == "dealer" else self.audit
        metadata = () if role is None else (("authorization", f"Bearer {TOKENS[role]}"),)
        return await getattr(stub, method)(request, metadata=metadata)


def write_tokens(path: Path) -> Path:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump({"tokens": {token: role for role, token in TOKENS.items()}}, file)
    return path


@pytest.fixture(params=SERVICE_BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    configure_logging("json")
    tokens = write_tokens(tmp_path / "tokens.json")
    base = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=tokens,
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    if request.param == "sqlite":
        yield base
    else:
        with fresh_database() as url:
            yield dataclasses.replace(base, database=url)


@pytest.fixture
async def service(settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[Service]:
    """A running service, with the test module's ``CATALOGUED`` tables (tests/catalogued.py)."""
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue_module_tables(app.store, request.module)
        yield Service(app, settings, channel)


@pytest.fixture
async def metered(settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[Service]:
    """The server fixture's service (SQLite and PostgreSQL), with its HTTP port and so its
    metrics at /metrics, and the test module's ``CATALOGUED`` tables."""
    with_http = dataclasses.replace(settings, http_listen="127.0.0.1:0")
    async with (
        running(with_http) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue_module_tables(app.store, request.module)
        yield Service(app, with_http, channel)
