"""The dealer's HTTP ports under hostile clients: the connection budget, refusals before work,
aiohttp's own parser refusals in the documented shape, and no ERROR for a client's mistake.

One real ``gnau serve`` runs under a 1024 open-file limit (systemd's default soft limit), with
both its page port and its metrics port, as an operator would run it.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gnau_service.edge import http as edge
from gnau_service.server.process.app import running
from tests.rawhttp import SECURITY_HEADERS, Answer, exchange, held_connection
from tests.serving import REPO, ServedHttp, served_with_http
from tests.web.conftest import web_settings

# make test-system: `gnau serve` processes and the HTTP edge's timers.
pytestmark = [pytest.mark.system, pytest.mark.asyncio(loop_scope="module")]

DESCRIPTORS = 1024
#: What each of two ports may hold under 1024 descriptors, less the reserve of 256 and two
#: accept backlogs of 128.
CAP_PER_PORT = (1024 - 256 - 2 * 128) // 2
MARK = b"zq-marker-91"  # sent in requests; no answer may echo it


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHttp]:
    data_dir = tmp_path_factory.mktemp("edge") / "data"
    with served_with_http(data_dir, preexec_fn=_limit_descriptors) as server:
        yield server


def health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(
            health_pb2.HealthCheckRequest(service="gnau.v1.DealerService"), timeout=5
        )
        return int(answer.status)


async def until_metric(ports: ServedHttp, name: str, value: int) -> None:
    seen = None
    for _ in range(300):
        answer = await exchange(ports.metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        for line in answer.body.decode().splitlines():
            if line.startswith(name + " "):
                seen = float(line.split()[-1])
        if seen == value:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} is {seen}, not {value}")


def is_held(connection: socket.socket) -> bool:
    """Whether the server keeps ``connection`` open without answering (a refused one has an
    answer waiting, then its end)."""
    connection.settimeout(0.01)
    try:
        connection.recv(4096)
    except TimeoutError:
        return True
    except OSError:
        pass
    return False


def assert_refusal_shape(answer: Answer, status: int) -> None:
    assert answer.status == status, answer
    assert answer.status_line.startswith("HTTP/1.1 "), answer.status_line
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    for name in SECURITY_HEADERS:
        assert name in answer.headers, (name, answer.headers)
    assert len(answer.body) < 600
    assert MARK not in answer.body
    document = answer.json()
    assert set(document) == {"error", "reason"}
    assert document["error"] == edge.ERROR_CODES[status]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_serving_line_states_the_descriptor_budget(ports: ServedHttp) -> None:
    (serving,) = [event for event in ports.served.log_events() if event["event"] == "serving"]
    assert serving["descriptors"] == DESCRIPTORS
    assert serving["http_connections_per_port"] == CAP_PER_PORT


async def test_many_connections_leave_grpc_and_health_alone(ports: ServedHttp) -> None:
    """Defect 1: ~1,100 idle connections used to exhaust the descriptors of a dealer under a
    1024 limit, and gRPC and health with them."""
    sources = [f"127.0.0.{10 + n}" for n in range(20)]  # 55 each: under the per-peer cap
    held = []
    for n in range(1100):
        held.append(held_connection(ports.page, sources[n % 20]))
        if n % 50 == 49:
            await asyncio.sleep(0.02)  # an accept queue that overflows delays SYNs by seconds
    try:
        await until_metric(ports, 'gnau_http_connections{port="page"}', CAP_PER_PORT)
        assert health(ports.served.target) == health_pb2.HealthCheckResponse.SERVING
        # Over the cap, a newcomer displaces the connection idle longest (issue 39, part 4): it
        # is served, and the port still holds exactly its cap.
        answer = await exchange(
            ports.page, b"GET /keys HTTP/1.1\r\nHost: x\r\n\r\n", source="127.0.1.1"
        )
        assert answer.status == 200
        await asyncio.sleep(0.2)
        # The flood's newest connections are the ones still held: the oldest were shed first.
        still_held = [is_held(connection) for connection in held]
        assert sum(still_held) == CAP_PER_PORT - 1
        assert not any(still_held[: len(held) - CAP_PER_PORT])
        # The metrics port has its own share, untouched.
        answer = await exchange(ports.metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.status == 200
    finally:
        for connection in held:
            connection.close()
    await asyncio.sleep(0.3)
    answer = await exchange(ports.page, b"GET /keys HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.status == 200
    events = ports.served.log_events()
    assert not [event for event in events if event.get("level") == "error"]
    warned = [event for event in events if event["event"] in ("http_refused", "http_shed")]
    assert 1 <= len(warned) <= len(sources) + 1  # at most one per peer per interval
    assert all(event["level"] == "warning" for event in warned)


async def test_one_peer_holds_at_most_its_share(ports: ServedHttp) -> None:
    held = [held_connection(ports.page, "127.0.2.1") for _ in range(edge.MAX_CONNECTIONS_PER_PEER)]
    try:
        await asyncio.sleep(0.2)
        answer = await exchange(
            ports.page, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", source="127.0.2.1"
        )
        assert_refusal_shape(answer, 429)
        answer = await exchange(
            ports.page, b"GET /keys HTTP/1.1\r\nHost: x\r\n\r\n", source="127.0.2.2"
        )
        assert answer.status == 200
    finally:
        for connection in held:
            connection.close()


#: Requests aiohttp's own parser refuses (defect 3), each with the status it must get.
MALFORMED = {
    "control byte in the target": (b"GET /a\x01" + MARK + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "over-long request line": (b"GET /" + MARK + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                               400),
    "over-long header": (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " + MARK * 900 + b"\r\n\r\n", 400),
    "129 headers": (
        b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (n, MARK) for n in range(129))
        + b"\r\n",
        400,
    ),
    "bad header name": (b"GET / HTTP/1.1\r\nHost: x\r\nBad Name" + MARK + b": 1\r\n\r\n", 400),
    "bad chunked framing": (
        b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz" + MARK + b"\r\n",
        400,
    ),
    "two content lengths": (
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400
    ),
    "not HTTP at all": (b"\x16\x03\x01\x02\x00" + MARK + b"\r\n\r\n", 400),
    "bad method": (b"G\x7fT / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "missing Host": (b"GET / HTTP/1.1\r\n\r\n", 400),
    "HTTP/2 preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400),
    "unsupported encoding": (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n\r\n", 415),
    "unknown expectation": (b"GET / HTTP/1.1\r\nHost: x\r\nExpect: " + MARK + b"\r\n\r\n", 417),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("port", ["page", "metrics"])
async def test_a_malformed_request_gets_the_documented_shape(
    ports: ServedHttp, port: str, name: str
) -> None:
    """Defects 2 and 3: the parser's refusals were text/plain, HTTP/1.0, without the security
    headers, echoing the request, and logged as ERROR with a traceback."""
    request, status = MALFORMED[name]
    answer = await exchange(getattr(ports, port), request)
    assert_refusal_shape(answer, status)
    assert not [event for event in ports.served.log_events() if event.get("level") == "error"]


async def test_a_declared_body_is_refused_before_it_is_read(ports: ServedHttp) -> None:
    """Defect 6: a declared 100 MB body with none sent got no answer; Expect got 100."""
    started = time.monotonic()
    answer = await exchange(
        ports.page, b"POST /keys HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"
    )
    assert_refusal_shape(answer, 413)
    assert time.monotonic() - started < 2
    answer = await exchange(
        ports.page,
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\nExpect: 100-continue\r\n\r\n",
    )
    assert_refusal_shape(answer, 413)


async def test_a_round_id_with_a_newline_is_invalid(ports: ServedHttp) -> None:
    """Defect 8: docs/web.md promises 400 for a control character; it was 404."""
    answer = await exchange(ports.page, b"GET /rounds/a%0ab/receipt HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_refusal_shape(answer, 400)


async def test_shipped_limits_are_what_the_edge_enforces() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "web.md").read_text(encoding="utf-8")
    for number in (
        edge.MAX_CONNECTIONS, edge.MAX_CONNECTIONS_PER_PEER, edge.DESCRIPTOR_RESERVE,
        edge.MAX_LINE_BYTES, edge.MAX_HEADERS, edge.ACCEPT_BACKLOG,
    ):  # fmt: skip
        assert f"{number:,}" in docs or str(number) in docs, number
    for seconds in (edge.IDLE_SECONDS, edge.HEADER_SECONDS, edge.BODY_SECONDS, edge.ANSWER_SECONDS):
        assert f"{seconds:g} s" in docs, seconds


async def test_a_client_that_stops_reading_is_cut_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer that never leaves (the client reads nothing) must not hold its connection:
    once its unsent bytes stop shrinking for ANSWER_SECONDS, the connection is aborted."""
    monkeypatch.setattr(edge, "ANSWER_SECONDS", 0.3)
    largest = max((REPO / "gnau_service" / "web" / "js").iterdir(), key=lambda f: f.stat().st_size)
    async with running(web_settings(tmp_path)) as app:
        assert app.web is not None and app.web.edge is not None
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(("127.0.0.1", app.http_port))
        request = f"GET /js/{largest.name} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        reader.sendall(request * 200)  # pipelined: answers pile up while nothing is read
        for _ in range(100):
            await asyncio.sleep(0.05)
            if app.web.edge.budget.open == 0:
                break
        assert app.web.edge.budget.open == 0
        reader.close()
