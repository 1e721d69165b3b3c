"""A real service with its HTTP port, a round played through gRPC, and Debian's chromium driven
by Playwright (never a browser Playwright downloads).

Chromium is found on the PATH. Where it is missing the browser tests are skipped with the
reason; in CI (``CI`` set) a missing chromium fails the run instead: ``.ci/run`` installs it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from gnau.v1 import dealer_pb2, dealer_pb2_grpc, round_pb2
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright

from gnau_service.server.process.app import App, running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from tests.catalogued import catalogue_module_tables
from tests.server.conftest import TOKENS, write_tokens

#: Flags for a headless chromium that talks to nothing but the test's own server.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SEATS = [
    round_pb2.Seat(seat_number=1, player_id="alice", stake=100, client_seed=b"alice's luck"),
    round_pb2.Seat(seat_number=2, player_id="bob", stake=250),
    round_pb2.Seat(seat_number=5, player_id="carol", stake=7),
]
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str:
    """Debian's chromium, or a skip (a failure in CI) saying why there is none."""
    path = shutil.which("chromium")
    if path is not None:
        return path
    reason = "chromium is not installed (apt-get install chromium): browser tests need it"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class WebService:
    """A running service with its HTTP port, and a public channel to it."""

    app: App
    channel: grpc.aio.Channel

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.app.http_port}/"

    @property
    def vkey(self) -> str:
        return self.app.store.signer.vkey

    async def log(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """``GET /log/PATH`` (the log's tiles): its status, headers and body, whatever they are."""
        return await asyncio.to_thread(http_get, f"{self.base_url}log/{path}")

    async def call(self, method: str, request: Any) -> Any:
        stub = dealer_pb2_grpc.DealerServiceStub(self.channel)
        metadata = (("authorization", f"Bearer {TOKENS['operator']}"),)
        return await getattr(stub, method)(request, metadata=metadata)

    async def play(self, table: str = "table-1", *, until: str = "Settle") -> str:
        """A round through gRPC as far as ``until`` (Deal, Reveal or Settle); its id."""
        shuffled = await self.call(
            "Shuffle", dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id=table)
        )
        round_id: str = shuffled.round.round_id
        steps = {
            "Deal": dealer_pb2.DealRequest(request_id="", round_id=round_id, seats=SEATS),
            "Reveal": dealer_pb2.RevealRequest(request_id="", round_id=round_id),
            "Settle": dealer_pb2.SettleRequest(request_id="", round_id=round_id),
        }
        for method, request in steps.items():
            request.request_id = str(uuid.uuid4())
            await self.call(method, request)
            if method == until:
                break
        return round_id


def http_get(url: str) -> tuple[int, dict[str, str], bytes]:
    """A plain GET: its status, headers and body, for an error status too."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def web_settings(directory: Path, **overrides: Any) -> Settings:
    configure_logging("json")
    values: dict[str, Any] = {
        "listen": "127.0.0.1:0",
        "http_listen": "127.0.0.1:0",
        "data_dir": directory / "data",
        "tokens": write_tokens(directory / "tokens.json"),
        "grace_seconds": 1,
        "shutdown_notice_seconds": 0,
    }
    return Settings(**(values | overrides))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def web_service(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[WebService]:
    """A service with its page port, and the test module's ``CATALOGUED`` tables."""
    settings = web_settings(tmp_path_factory.mktemp("web"))
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue_module_tables(app.store, request.module)
        yield WebService(app, channel)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def listing_web_service(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[WebService]:
    """A service that lets the public list rounds (``public_round_listing``: off by default),
    with the test module's ``CATALOGUED`` tables."""
    settings = web_settings(tmp_path_factory.mktemp("web-listing"), public_round_listing=True)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue_module_tables(app.store, request.module)
        yield WebService(app, channel)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = chromium_path()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh page (no stored key); any script error on it fails the test."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))

    def console(message: ConsoleMessage) -> None:
        # A refused fetch (a 404 the test asks for) is logged too; it is not a script error.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    opened.on("console", console)
    yield opened
    await context.close()
    assert not errors, f"the page reported errors: {errors}"


@pytest.fixture
def vectors() -> Iterator[list[Path]]:
    yield sorted((Path(__file__).parents[2] / "docs" / "vectors").glob("fairness-round-*.json"))
