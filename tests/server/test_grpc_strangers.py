"""The gRPC port under hostile clients (issue 39): a stranger's call costs a status and no more,
and no caller, however many connections and addresses it uses, starves another.

Each test is a row of the issue's table of attacks, made with raw HTTP/2 frames
(:mod:`tests.rawh2`) against the service, while an honest client checks health and plays a round
on its own channel. The numbers are docs/api.md's (*Limits*, *Callers' shares*).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from typing import Final

import grpc
import pytest
from gnau.v1 import audit_pb2, audit_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hyperframe.frame import HeadersFrame, RstStreamFrame

from gnau_service.server.grpc import interceptors
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.rawh2 import Connection, Received, grpc_headers, grpc_message
from tests.server.conftest import TOKENS, Service
from tests.server.test_interceptors import log_lines
from tests.server.test_service import play

CATALOGUED: Final = ("strangers",)
SHUFFLE: Final = "/gnau.v1.DealerService/Shuffle"
WATCH: Final = "/gnau.v1.AuditService/WatchEntries"
PERMISSION_DENIED: Final = grpc.StatusCode.PERMISSION_DENIED.value[0]
RESOURCE_EXHAUSTED: Final = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
DEADLINE_EXCEEDED: Final = grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
#: HTTP/2's CANCEL: a client abandoning a stream.
CANCEL: Final = 0x8
REFUSED_STREAM: Final = 0x7
ENHANCE_YOUR_CALM: Final = 0xB


async def honest_client_is_served(service: Service) -> None:
    """What the attacks must leave alone: health on a channel of its own, and a whole round."""
    health = health_pb2_grpc.HealthStub(service.channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert (await play(service, "strangers")).settlement


def open_headers_only(
    port: int, streams: int, *, token: str | None, wait: float
) -> tuple[Connection, Received]:
    """``streams`` Shuffle calls on one connection that send their headers and never a body;
    what came back within ``wait`` seconds (the connection stays open)."""
    connection = Connection(port)
    connection.start()
    ids = [1 + 2 * n for n in range(streams)]
    for stream_id in ids:
        block = connection.header_block(grpc_headers(SHUFFLE, token=token))
        connection.send(HeadersFrame(stream_id, block, flags=["END_HEADERS"]))
    received = connection.read(wait, until=lambda got: all(map(got.finished, ids)))
    return connection, received


@pytest.fixture
def held() -> Iterator[list[Connection]]:
    """Raw connections a test leaves open while the honest client works; closed at its end."""
    connections: list[Connection] = []
    yield connections
    for connection in connections:
        connection.close()


async def test_calls_without_credentials_are_refused_as_their_headers_arrive(
    service: Service, held: list[Connection]
) -> None:
    """Row: 1,100 calls without credentials that send headers and never a body (22 connections
    x 50). They used to wait for their bodies and fill the 1,000 calls allowed, health's and
    every honest round's included; now each is refused as its headers arrive (the first 100 of
    one address at once, the rest 2 s late), its body never awaited."""
    port = service.app.port
    flood = await asyncio.gather(
        *(asyncio.to_thread(open_headers_only, port, 50, token=None, wait=10) for _ in range(22))
    )
    for connection, received in flood:
        held.append(connection)
        statuses = {received.grpc_status(1 + 2 * n) for n in range(50)}
        assert statuses == {PERMISSION_DENIED}, received.summary()
    assert service.app.interceptor._calls.open == 0  # none holds a call slot
    await honest_client_is_served(service)


async def test_a_caller_whose_calls_send_no_body_holds_its_own_share_only(
    settings: Settings, held: list[Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's headers-only calls hold that operator's slots, for 10 s at most (here a
    fraction of a second); the calls beyond its share are refused at once, and everyone else
    (an auditor, health) is served meanwhile."""
    monkeypatch.setattr(interceptors, "REQUEST_SECONDS", 1.0)
    settings = dataclasses.replace(settings, max_concurrent_rpcs=20, max_calls_per_caller=5)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        connection, received = await asyncio.to_thread(
            open_headers_only, app.port, 8, token=TOKENS["operator"], wait=0.5
        )
        held.append(connection)
        refused = [n for n in range(8) if received.grpc_status(1 + 2 * n) == RESOURCE_EXHAUSTED]
        assert len(refused) == 3, received.summary()
        assert "already has 5 calls in flight" in str(
            received.header(1 + 2 * refused[0], "grpc-message")
        )
        assert app.interceptor._calls.open == 5
        # Others are served meanwhile.
        checkpoint = await audit_pb2_grpc.AuditServiceStub(channel).GetCheckpoint(
            audit_pb2.GetCheckpointRequest(),
            metadata=(("authorization", f"Bearer {TOKENS['auditor']}"),),
        )
        assert checkpoint.checkpoint.startswith(settings.origin)
        # The five that hold a slot give it back when their request does not come.
        later = await asyncio.to_thread(
            connection.read, 5, lambda got: all(got.finished(1 + 2 * n) for n in range(8))
        )
        waited = [n for n in range(8) if n not in refused]
        assert {later.grpc_status(1 + 2 * n) for n in waited} == {DEADLINE_EXCEEDED}
        assert app.interceptor._calls.open == 0


async def test_one_token_from_many_addresses_holds_its_share_of_streams_only(
    settings: Settings, held: list[Connection], capsys: pytest.CaptureFixture[str]
) -> None:
    """Row: one token opens 600 WatchEntries streams from 40 addresses. It used to hold all the
    500 streams the server allows (50 an address), so that a second token could open none; now
    the token holds its 50, the rest are refused with one warning, and the second is served."""
    tokens = json.loads(settings.tokens.read_text())
    tokens["tokens"]["second-auditor"] = "auditor"
    settings.tokens.write_text(json.dumps(tokens))
    request = grpc_message(audit_pb2.WatchEntriesRequest().SerializeToString())

    def open_streams(source: str) -> tuple[Connection, Received]:
        connection = Connection(app.port, source=source)
        connection.start()
        ids = [1 + 2 * n for n in range(15)]
        for stream_id in ids:
            connection.request(stream_id, grpc_headers(WATCH, token=TOKENS["auditor"]), request)
        answered = connection.read(
            5, until=lambda got: all(got.finished(n) or got.headers.get(n) for n in ids)
        )
        return connection, answered

    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        capsys.readouterr()
        opened = await asyncio.gather(
            *(asyncio.to_thread(open_streams, f"127.0.4.{n + 1}") for n in range(40))
        )
        outcomes: Counter[str] = Counter()
        for connection, received in opened:
            held.append(connection)
            for stream_id in (1 + 2 * n for n in range(15)):
                status = received.grpc_status(stream_id)
                if status is None and not received.finished(stream_id):
                    outcomes["open"] += 1
                else:
                    outcomes[f"status {status}"] += 1
        assert outcomes == {"open": 50, f"status {RESOURCE_EXHAUSTED}": 550}
        second = audit_pb2_grpc.AuditServiceStub(channel).WatchEntries(
            audit_pb2.WatchEntriesRequest(),
            metadata=(("authorization", "Bearer second-auditor"),),
        )
        assert (await second.read()).entries[0].index == 0
        second.cancel()
        warnings = [
            line for line in log_lines(capsys.readouterr().err) if line["event"] == "over a share"
        ]
        assert len(warnings) == 1, warnings  # one per caller per minute, with its count
        assert warnings[0]["level"] == "warning" and warnings[0]["kind"] == "streams"
        assert warnings[0]["caller"].startswith("token:")


async def test_rapid_reset_streams_are_refused_beyond_the_streams_a_connection_may_hold(
    service: Service, held: list[Connection]
) -> None:
    """Row: 5,000 streams opened and reset at once on one connection (HTTP/2 Rapid Reset). The
    server holds each connection to 100 streams at once, counting those reset but not yet
    ended; the rest are refused by gRPC's core before any of the service's code runs."""

    def rapid_reset() -> tuple[Connection, Received, int]:
        connection = Connection(service.app.port)
        connection.start()
        sent = 0
        for n in range(5000):
            stream_id = 1 + 2 * n
            block = connection.header_block(grpc_headers("/grpc.health.v1.Health/Check"))
            if not connection.send(
                HeadersFrame(stream_id, block, flags=["END_HEADERS"]),
                RstStreamFrame(stream_id, error_code=CANCEL),
            ):
                break
            sent += 1
        return connection, connection.read(2), sent

    connection, received, sent = await asyncio.to_thread(rapid_reset)
    held.append(connection)
    refused = [code for code in received.resets.values() if code != CANCEL]
    assert sent == 5000
    # Those the server could not take at once were refused: REFUSED_STREAM, or
    # ENHANCE_YOUR_CALM. Without the limit every one was taken, and none refused.
    assert refused, received.summary()[:300]
    assert set(refused) <= {REFUSED_STREAM, ENHANCE_YOUR_CALM}, received.summary()[:300]
    await honest_client_is_served(service)
