"""No call blocks the event loop: with asyncio's debug mode timing every callback, rounds played
and every read RPC (and the HTTP port's reads) run without one callback taking
:data:`SLOW_CALLBACK_SECONDS`. A database read, a signature check over a round's entries or a
sleep made on the loop shows up here as an ``Executing ... took`` warning from asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Iterator

import aiohttp
import grpc
from gnau.v1 import audit_pb2, dealer_pb2

from gnau_service.server.app import running
from gnau_service.server.config import Settings
from tests.server.conftest import TOKENS, Service
from tests.server.test_service import play, shuffle

AUDITOR = (("authorization", f"Bearer {TOKENS['auditor']}"),)
#: A callback that runs this long holds every other call up: asyncio logs it in debug mode.
SLOW_CALLBACK_SECONDS = 0.05


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def slow_callbacks() -> Iterator[list[str]]:
    """asyncio's own warnings about callbacks that took :data:`SLOW_CALLBACK_SECONDS` or more,
    while the block runs in debug mode."""
    loop = asyncio.get_running_loop()
    debug, threshold = loop.get_debug(), loop.slow_callback_duration
    handler = _Collected()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK_SECONDS
    try:
        yield handler.messages
    finally:
        loop.slow_callback_duration = threshold
        loop.set_debug(debug)
        logger.removeHandler(handler)


@contextlib.asynccontextmanager
async def served_with_http(settings: Settings) -> AsyncIterator[Service]:
    with_http = dataclasses.replace(settings, http_listen="127.0.0.1:0")
    async with (
        running(with_http) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Service(app, with_http, channel)


async def rounds_and_reads(service: Service) -> None:
    """Rounds on two tables at once, then each read RPC, then the HTTP port's reads."""
    settled = await asyncio.gather(play(service, "table-1"), play(service, "table-2"))
    await shuffle(service, "table-3")  # an open round beside them
    round_id = settled[0].round_id
    reads = [
        ("dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=round_id)),
        ("dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id="table-1")),
        ("dealer", "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=round_id)),
        ("dealer", "GetHouseRulesInfo", dealer_pb2.GetHouseRulesInfoRequest()),
        ("audit", "GetCheckpoint", audit_pb2.GetCheckpointRequest()),
        ("audit", "GetInclusionProof", audit_pb2.GetInclusionProofRequest(index=1, tree_size=4)),
        (
            "audit",
            "GetConsistencyProof",
            audit_pb2.GetConsistencyProofRequest(first_size=2, second_size=4),
        ),
        ("audit", "GetPublicKeys", audit_pb2.GetPublicKeysRequest()),
        ("audit", "VerifyRound", audit_pb2.VerifyRoundRequest(round_id=round_id)),
    ]
    for service_name, method, request in reads:
        await service.call(service_name, method, request)
    checkpoints = service.audit.GetCheckpoints(
        audit_pb2.GetCheckpointsRequest(first_size=1),
        metadata=AUDITOR,
    )
    assert [response async for response in checkpoints]
    entries = service.audit.GetEntries(
        audit_pb2.GetEntriesRequest(start=0),
        metadata=AUDITOR,
    )
    assert [response async for response in entries]
    base = f"http://127.0.0.1:{service.app.http_port}"
    async with aiohttp.ClientSession() as http:
        for path in (
            f"/rounds/{round_id}/receipt",
            "/rounds?table_id=table-1",
            "/keys",
            "/metrics",
            "/",
        ):
            async with http.get(base + path) as response:
                assert response.status == 200, path
                await response.read()


async def test_rounds_and_reads_never_block_the_event_loop(settings: Settings) -> None:
    async with served_with_http(settings) as service:
        await play(service)  # the first round warms what is made once (connections, caches)
        with slow_callbacks() as slow:
            await rounds_and_reads(service)
    assert not slow, "\n".join(slow)
