"""Streams cannot starve the dealer: limited per peer and in total, waiting on the log's tail
without a thread, and held by flow control when the client does not read."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from gnau.v1 import audit_pb2, audit_pb2_grpc

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.server.grpc import servicers
from gnau_service.server.grpc.streams import StreamSlots
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.store import LogTail
from tests.catalogued import catalogue
from tests.server.conftest import TOKENS, Service
from tests.server.test_interceptors import error_info
from tests.server.test_service import play

AUDITOR = (("authorization", f"Bearer {TOKENS['auditor']}"),)
PACKAGE = str(Path(servicers.__file__).resolve().parents[1])


async def until(condition: Callable[[], bool], seconds: float = 20) -> None:
    """Wait for ``condition`` (a bound on liveness, not a claim about speed)."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


def watch(channel: grpc.aio.Channel, start: int = 0) -> grpc.aio.UnaryStreamCall:
    return audit_pb2_grpc.AuditServiceStub(channel).WatchEntries(
        audit_pb2.WatchEntriesRequest(start_index=start), metadata=AUDITOR
    )


async def test_a_caller_over_its_share_is_refused_and_a_closed_stream_frees_a_slot(
    settings: Settings,
) -> None:
    settings = dataclasses.replace(settings, max_streams=10, max_streams_per_caller=3)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        streams = [watch(channel) for _ in range(3)]
        for stream in streams:
            await stream.read()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await watch(channel).read()
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info(refused.value).reason == "TOO_MANY_STREAMS"
        # The auditor's share (its credential's name), not the server's.
        assert str(refused.value.details()).startswith("token:")
        assert "already has 3 streams open" in str(refused.value.details())
        streams[0].cancel()
        await until(lambda: app.streams.open == 2)
        replacement = watch(channel)
        assert (await replacement.read()).entries[0].index == 0


async def test_the_server_over_its_total_is_refused_whoever_asks(settings: Settings) -> None:
    # Two callers (two auditors' tokens) from two peers: the IPv4 and the IPv6 loopback
    # addresses of a dual-stack listener.
    tokens = json.loads(settings.tokens.read_text())
    tokens["tokens"]["second-auditor"] = "auditor"
    settings.tokens.write_text(json.dumps(tokens))
    settings = dataclasses.replace(
        settings, listen="[::]:0", max_streams=4, max_streams_per_caller=3
    )
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as first,
        grpc.aio.insecure_channel(f"[::1]:{app.port}") as second,
    ):
        held = [watch(first) for _ in range(3)] + [second_auditor_watch(second)]
        for stream in held:
            await stream.read()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await (
                audit_pb2_grpc.AuditServiceStub(second)
                .WatchEntries(
                    audit_pb2.WatchEntriesRequest(),
                    metadata=(("authorization", "Bearer second-auditor"),),
                )
                .read()
            )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert str(refused.value.details()).startswith("the server already has 4 streams")


def second_auditor_watch(channel: grpc.aio.Channel) -> grpc.aio.UnaryStreamCall:
    return audit_pb2_grpc.AuditServiceStub(channel).WatchEntries(
        audit_pb2.WatchEntriesRequest(), metadata=(("authorization", "Bearer second-auditor"),)
    )


def test_slots_count_per_caller_and_in_total() -> None:
    async def scenario() -> list[str]:
        slots = StreamSlots(total=3, per_caller=2)
        refusals = []
        with slots.held("a"), slots.held("a"), slots.held("b"):
            for peer in ("a", "b", "c"):
                try:
                    with slots.held(peer):
                        pass
                except Exception as error:
                    refusals.append(str(error))
            assert slots.open == 3
        assert slots.open == 0
        return refusals

    refusals = asyncio.run(scenario())
    assert refusals == [
        "a already has 2 streams open, the most allowed; close one first",
        "the server already has 3 streams open, the most allowed; close one first",
        "the server already has 3 streams open, the most allowed; close one first",
    ]


@pytest.mark.system
async def test_waiting_streams_hold_no_thread(service: Service) -> None:
    # Each stream used to wait in a thread of the loop's small default pool, and the store's
    # BEGIN and COMMIT queued behind them. Now a waiting stream is a suspended coroutine.
    streams = [watch(service.channel) for _ in range(12)]
    for stream in streams:
        await stream.read()
    await asyncio.sleep(0.3)  # every stream is now waiting for more
    executor_threads = {
        thread.ident for thread in threading.enumerate() if thread.name.startswith("asyncio")
    }
    busy = [
        frame.f_code.co_filename
        for thread_id, frame in sys._current_frames().items()
        if thread_id in executor_threads
        for frame in _stack(frame)
        if frame.f_code.co_filename.startswith(PACKAGE)
    ]
    assert busy == []
    settled = await play(service)  # and rounds go on
    received: list[int] = []
    while max(received, default=-1) < settled.log_indices[-1]:
        received += [entry.index for entry in (await streams[0].read()).entries]
    for stream in streams:
        stream.cancel()


#: A client in a process of its own (in-process, client and server share one gRPC core, whose
#: flow-control windows then grow without bound), opening streams it never reads.
STALLED_CLIENT = """
import asyncio, sys, grpc
from gnau.v1 import audit_pb2, audit_pb2_grpc
async def main():
    async with grpc.aio.insecure_channel(sys.argv[1]) as channel:
        stub = audit_pb2_grpc.AuditServiceStub(channel)
        calls = [stub.WatchEntries(audit_pb2.WatchEntriesRequest(start_index=0),
                                   metadata=(("authorization", "Bearer audit-token"),))
                 for _ in range(3)]
        print("open", flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


@pytest.mark.system
async def test_readers_that_never_read_are_held_by_flow_control(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_pages = 0
    real_follow = servicers.follow

    async def counted(tail: LogTail, start: int) -> AsyncIterator[tuple[int, list[bytes]]]:
        nonlocal sent_pages
        async for page in real_follow(tail, start, interval=0):
            sent_pages += 1
            yield page

    async def append(entries: int) -> None:
        payload: dict[str, JsonValue] = {"filler": "x" * 1000}
        for _ in range(entries // 100):
            await service.app.store.run_async(
                lambda tx: [tx.append(EntryKind.CONFIG_CHANGED, payload) for _ in range(100)]
            )

    monkeypatch.setattr(servicers, "follow", counted)
    client = subprocess.Popen(
        [sys.executable, "-c", STALLED_CLIENT, f"127.0.0.1:{service.app.port}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None and client.stdout.readline() == "open\n"
        await until(lambda: service.app.streams.open == 3)
        await append(10_000)  # 10 MB a stream: far more than HTTP/2 lets through unread
        await asyncio.sleep(0.5)
        held_at = sent_pages
        await append(10_000)
        await asyncio.sleep(0.5)
    finally:
        client.kill()
        client.wait()
    assert held_at < 3 * 100, "a stream was not held"
    assert sent_pages == held_at, "the server kept producing for clients that do not read"


def _stack(frame: Any) -> list[Any]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


@pytest.mark.system
async def test_streams_cancelled_under_load_leave_no_trace(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    # Cancels racing writes used to log an ExecuteBatchError traceback.
    capsys.readouterr()

    async def read_then_cancel(after: float) -> None:
        call = watch(service.channel)
        reading = asyncio.ensure_future(_drain(call))
        await asyncio.sleep(after)
        call.cancel()
        await asyncio.gather(reading, return_exceptions=True)

    async def load() -> None:
        for _ in range(6):
            table = f"cancel-load-{uuid.uuid4()}"
            await catalogue(service.app.store, [table])  # a round is dealt at a catalogued table
            await play(service, table)

    await asyncio.gather(load(), load(), *(read_then_cancel(0.01 * n) for n in range(40)))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ExecuteBatchError" not in err
    for line in err.splitlines():
        event = json.loads(line)
        assert event["level"] in ("info", "warning") and "exception" not in event, line
    await until(lambda: service.app.streams.open == 0)  # every slot is given back


async def _drain(call: grpc.aio.UnaryStreamCall) -> None:
    async for _ in call:
        pass
