"""No call blocks the event loop: with asyncio's debug mode timing every callback, rounds played
and every read RPC (and the HTTP port's reads) run without one callback taking
:data:`SLOW_CALLBACK_SECONDS`. A slow database read, a signature check over a round's entries or
a sleep made on the loop shows up here as an ``Executing ... took`` warning from asyncio.

asyncio times a callback by the clock, so on a busy machine any callback may now and then wait
that long for the CPU or for the GIL (a worker thread holding it). A blocking call is slow every
time its callback runs: a callback counts as blocking only if it was slow in each of
:data:`ATTEMPTS` runs of the same calls (a run with no slow callback at all ends the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Iterator

import aiohttp
import grpc
from gnau.v1 import audit_pb2, dealer_pb2

from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.catalogued import catalogue
from tests.server.conftest import TOKENS, Service
from tests.server.test_service import play, shuffle

AUDITOR = (("authorization", f"Bearer {TOKENS['auditor']}"),)
#: A callback that runs this long holds every other call up: asyncio logs it in debug mode.
SLOW_CALLBACK_SECONDS = 0.05
ATTEMPTS = 3
#: What asyncio names a callback by: a task by its name, or by its coroutine if the name is one
#: asyncio made up (``Task-123``, new each run); any other callback by its function.
_TASK: re.Pattern[str] = re.compile(r"<Task \w+ name='(?P<name>[^']*)' coro=<(?P<coro>[^(]+)")
_HANDLE: re.Pattern[str] = re.compile(r"<(?:Timer)?Handle (?P<callback>[^(]+)")


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


def callback_of(message: str) -> str:
    """The callback an ``Executing <callback> took N seconds`` warning names, the same in each
    run."""
    task = _TASK.search(message)
    if task is not None:
        auto_named = re.fullmatch(r"Task-\d+", task["name"]) is not None
        return task["coro"] if auto_named else task["name"]
    handle = _HANDLE.search(message)
    return message if handle is None else handle["callback"]


@contextlib.asynccontextmanager
async def served_with_http(settings: Settings) -> AsyncIterator[Service]:
    # The public may list, so that GET /rounds is read too.
    with_http = dataclasses.replace(settings, http_listen="127.0.0.1:0", public_round_listing=True)
    async with (
        running(with_http) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        # The tables each attempt deals at (issue 38: only a catalogued table deals).
        await catalogue(app.store, [f"table-{attempt}" for attempt in range(ATTEMPTS)])
        yield Service(app, with_http, channel)


async def rounds_and_reads(service: Service, table: str) -> None:
    """A round, an open round beside it, then each read RPC, then the HTTP port's reads."""
    round_id = (await play(service, table)).round_id
    await shuffle(service, table)
    reads = [
        ("dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=round_id)),
        ("dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id=table)),
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
            f"/rounds?table_id={table}",
            "/keys",
            "/metrics",
            "/",
        ):
            async with http.get(base + path) as response:
                assert response.status == 200, path
                await response.read()


async def test_rounds_and_reads_never_block_the_event_loop(settings: Settings) -> None:
    blocking: set[str] | None = None
    seen: list[str] = []
    async with served_with_http(settings) as service:
        await play(service)  # the first round warms what is made once (connections, caches)
        for attempt in range(ATTEMPTS):
            with slow_callbacks() as slow:
                await rounds_and_reads(service, f"table-{attempt}")
            seen += slow
            slow_now = {callback_of(message) for message in slow}
            blocking = slow_now if blocking is None else blocking & slow_now
            if not blocking:
                break
    assert not blocking, f"slow in each of {ATTEMPTS} runs: {sorted(blocking)}\n" + "\n".join(seen)


def test_a_callback_is_named_the_same_in_each_run() -> None:
    rpc = (
        "Executing <Task pending name='HandleExceptions[/gnau.v1.DealerService/Deal]' "
        "coro=<_handle_exceptions() running at server.pyx.pxi:None> took 0.101 seconds"
    )
    step = "Executing <Task pending name='Task-6385' coro=<LogTail._poll() running at tail.py:1>"
    handle = "Executing <Handle _chain_future.<locals>._set_state(<Future finished>) at f.py:381>"
    assert callback_of(rpc) == "HandleExceptions[/gnau.v1.DealerService/Deal]"
    assert callback_of(step) == "LogTail._poll"
    assert callback_of(handle) == "_chain_future.<locals>._set_state"
