"""The witness's HTTP port under hostile clients: bounded text refusals that echo nothing, no
500 for any body, limits before the body is read, no ERROR or traceback for a client's mistake,
its connection budget, and a stop within its grace whatever a client holds open.

The edge's timeouts are seconds long in production; here they are shortened on the module that
reads them (:mod:`gnau_service.edge.http`), so the same code runs in a second.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from gnau_service.audit.cosignature import WitnessSigner
from gnau_service.edge import http as edge
from gnau_service.witness import server as witness_server
from gnau_service.witness.logs import parse_logs
from gnau_service.witness.server import RunningWitness, Witness, start_witness
from gnau_service.witness.state import WitnessState
from tests.rawhttp import Answer, exchange, held_connection, parse_answer
from tests.witnessing import GrowingLog, write_logs_toml

MARK = b"zq-marker-91"
PATH = b"/w/add-checkpoint"


@pytest.fixture
async def witness(tmp_path: Path) -> AsyncIterator[tuple[int, RunningWitness, GrowingLog]]:
    log = GrowingLog.new(size=5)
    toml = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]}, "/w")
    state = WitnessState(tmp_path / "witness.db")
    signer = WitnessSigner.generate("witness.example/w1")
    running = await start_witness(
        Witness(signer, parse_logs(toml.read_text()), state), "127.0.0.1", 0, connections=20
    )
    yield running.addresses[0][1], running, log
    await running.stop()
    state.close()


def post(body: bytes, *headers: bytes) -> bytes:
    lines = [b"POST " + PATH + b" HTTP/1.1", b"Host: w", b"Content-Length: %d" % len(body)]
    return b"\r\n".join([*lines, *headers, b"", body])


def assert_text_refusal(answer: Answer, status: int) -> None:
    assert answer.status == status, answer
    assert answer.status_line.startswith("HTTP/1.1 "), answer.status_line
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert 0 < len(answer.body) <= witness_server.MAX_REASON_CHARS + 1
    assert answer.body.endswith(b"\n") and answer.body.count(b"\n") == 1
    assert MARK not in answer.body


async def test_a_long_method_gets_a_bounded_answer(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    """Defect 4: a 10 KB method name got a 10 KB body back."""
    port, _, _ = witness
    answer = await exchange(
        port, b"X" * 8000 + MARK + b" " + PATH + b" HTTP/1.1\r\nHost: w\r\n\r\n"
    )
    assert answer.status in {400, 405}
    assert_text_refusal(answer, answer.status)
    answer = await exchange(port, b"GET " + PATH + b"?" + MARK + b" HTTP/1.1\r\nHost: w\r\n\r\n")
    assert_text_refusal(answer, 405)
    answer = await exchange(
        port, b"POST /" + MARK + b" HTTP/1.1\r\nHost: w\r\nContent-Length: 0\r\n\r\n"
    )
    assert_text_refusal(answer, 404)


async def test_a_compressed_body_is_refused_not_inflated(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    """Defect 5: gzip with garbage got a 500."""
    port, _, _ = witness
    for encoding in (b"gzip", b"deflate", b"br", b"x-" + MARK):
        answer = await exchange(
            port, post(b"\x1f\x8b garbage" + MARK, b"Content-Encoding: " + encoding)
        )
        assert_text_refusal(answer, 415)


async def test_a_declared_body_over_the_limit_is_refused_unread(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    """Defect 6: Content-Length 104857600 with no body got no answer; Expect got 100."""
    port, _, _ = witness
    started = time.monotonic()
    head = b"POST " + PATH + b" HTTP/1.1\r\nHost: w\r\nContent-Length: 104857600\r\n"
    assert_text_refusal(await exchange(port, head + b"\r\n"), 413)
    answer = await exchange(port, head + b"Expect: 100-continue\r\n\r\n")
    assert_text_refusal(answer, 413)
    assert time.monotonic() - started < 2
    chunked = b"POST " + PATH + b" HTTP/1.1\r\nHost: w\r\nTransfer-Encoding: chunked\r\n\r\n"
    size = witness_server.MAX_REQUEST_BYTES + 10
    answer = await exchange(port, chunked + b"%x\r\n" % size + b"a" * size + b"\r\n0\r\n\r\n")
    assert_text_refusal(answer, 413)


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /w/add\x01checkpoint HTTP/1.1\r\nHost: w\r\n\r\n",
        b"POST "
        + PATH
        + b" HTTP/1.1\r\n"
        + b"".join(b"X-%d: a\r\n" % n for n in range(200))
        + b"\r\n",
        b"POST " + PATH + b" HTTP/1.1\r\nHost: w\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST " + PATH + b" HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"\x16\x03\x01\x00\xa5" + MARK + b"\r\n\r\n",
    ],
    ids=["control byte", "200 headers", "bad chunk", "two lengths", "TLS hello"],
)
async def test_parser_refusals_are_text_lines_and_not_errors(
    witness: tuple[int, RunningWitness, Any], request_bytes: bytes
) -> None:
    port, _, _ = witness
    with structlog.testing.capture_logs() as events:
        answer = await exchange(port, request_bytes)
    assert_text_refusal(answer, 400)
    assert not [event for event in events if event["log_level"] in {"error", "critical"}]


async def test_a_client_gone_mid_body_is_not_an_error(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    """Defect 2 (the witness's half): a disconnect mid-body logged a ConnectionResetError
    traceback."""
    port, _, _ = witness
    with structlog.testing.capture_logs() as events:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post(b"old 0\n")[:-3].replace(b"Content-Length: 6", b"Content-Length: 900"))
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()
        await asyncio.sleep(0.3)
    assert not [event for event in events if event["log_level"] in {"error", "critical"}]


async def test_slow_and_idle_clients_are_cut_off(
    witness: tuple[int, RunningWitness, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, _, _ = witness
    monkeypatch.setattr(edge, "HEADER_SECONDS", 0.5)
    monkeypatch.setattr(edge, "BODY_SECONDS", 0.5)
    # Headers that trickle in are answered 408 once the header deadline passes.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST " + PATH + b" HTTP/1.1\r\n")
    async with asyncio.timeout(3):
        for _ in range(3):
            writer.write(b"X-Slow: 1\r\n")
            await asyncio.sleep(0.3)
        data = await reader.read()
    writer.close()
    answer = parse_answer(data)
    assert_text_refusal(answer, 408)
    # A body that never finishes is answered 408 once the body deadline passes.
    started = time.monotonic()
    answer = await exchange(port, post(b"old 0\n\n")[:-4].replace(b"Length: 7", b"Length: 70"))
    assert_text_refusal(answer, 408)
    assert time.monotonic() - started < 2


async def test_a_newcomer_to_a_full_port_displaces_the_oldest_idle_connection(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    port, _, _ = witness
    held = []
    for n in range(20):
        held.append(held_connection(port, f"127.0.3.{n % 5 + 1}"))
        await asyncio.sleep(0.01)  # accepted in this order
    try:
        await asyncio.sleep(0.2)
        answer = await exchange(port, post(b"old 0\n\n"), source="127.0.3.9")
        assert answer.status == 400  # served (the note is not a checkpoint), not refused
        await asyncio.sleep(0.1)
        assert [is_closed(connection) for connection in held] == [True] + [False] * 19
    finally:
        for connection in held:
            connection.close()


async def test_a_port_whose_every_connection_is_mid_request_refuses_at_once(
    witness: tuple[int, RunningWitness, Any],
) -> None:
    port, _, _ = witness
    # Each has sent a request's headers and is sending its body: none may be shed.
    held = [held_connection(port, f"127.0.3.{n % 5 + 1}") for n in range(20)]
    for connection in held:
        connection.sendall(post(b"old 0\n\n")[:-4].replace(b"Length: 7", b"Length: 70"))
    try:
        await asyncio.sleep(0.3)
        answer = await exchange(port, post(b"old 0\n\n"), source="127.0.3.9")
        assert_text_refusal(answer, 503)
        assert not any(is_closed(connection) for connection in held)
    finally:
        for connection in held:
            connection.close()
    await asyncio.sleep(0.2)
    assert (await exchange(port, post(b"old 0\n\n"))).status == 400  # served again


def is_closed(connection: socket.socket) -> bool:
    """Whether the server closed ``connection`` (an end of stream, or a reset, to read)."""
    connection.settimeout(0.05)
    try:
        return connection.recv(4096) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


async def test_a_stop_ends_within_the_grace_whatever_a_client_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 7: one unfinished body held the witness's stop for 60 s."""
    monkeypatch.setattr(witness_server, "GRACE_SECONDS", 1.0)
    log = GrowingLog.new(size=5)
    toml = write_logs_toml(tmp_path / "logs.toml", {log.origin: [log.vkey]}, "/w")
    state = WitnessState(tmp_path / "witness.db")
    running = await start_witness(
        Witness(WitnessSigner.generate("w.example/1"), parse_logs(toml.read_text()), state),
        "127.0.0.1",
        0,
    )
    port = running.addresses[0][1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(post(b"x" * 100)[:-90])  # a body that never finishes
    idle = held_connection(port, "127.0.0.1")
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await running.stop()
    assert time.monotonic() - started < 1.5
    writer.close()
    idle.close()
    state.close()
