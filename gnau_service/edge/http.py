"""Every HTTP port's budget: connections, time, bytes, and the shape of each refusal.

The dealer's page port (``--http-listen``), its metrics port (``--metrics-listen``) and the
witness (``gnau witness serve``) are all served by :class:`EdgeRunner`, an aiohttp runner held to
the limits below. A hostile client can cost each port at most its share of descriptors, a few
seconds of a connection, and a refusal that is written without reading further.

=================================  ==============================  ==============================
limit                              value                           beyond it
=================================  ==============================  ==============================
connections open on one port       :data:`MAX_CONNECTIONS`, less   the oldest connection that
                                   when the descriptor limit is    is not mid-request is closed
                                   low (:func:`connection_cap`)    to make room; if every one
                                                                   is, 503 ``UNAVAILABLE``,
                                                                   written at once, then closed
connections from one peer address  :data:`MAX_CONNECTIONS_PER_PEER`  429 ``RESOURCE_EXHAUSTED``,
                                                                  then closed
a connection with no request       :data:`IDLE_SECONDS`            closed
a request's line and headers,      :data:`HEADER_SECONDS`          408 ``DEADLINE_EXCEEDED``,
from its first byte                                                closed
a request's body                   :data:`BODY_SECONDS`            408 ``DEADLINE_EXCEEDED``,
                                                                  closed
an answer's unsent bytes must      :data:`ANSWER_SECONDS`          the connection is aborted
shrink (the client reads) within
the request line, each header      :data:`MAX_LINE_BYTES` bytes    400 ``INVALID_ARGUMENT``
headers in one request             :data:`MAX_HEADERS`             400 ``INVALID_ARGUMENT``
a declared body (Content-Length)   the port's ``max_body_bytes``   413 ``PAYLOAD_TOO_LARGE``,
                                                                  before any of it is read
``Content-Encoding`` of a body     only ``identity``               415 ``UNSUPPORTED_MEDIA_TYPE``
``Expect``                         only ``100-continue``, and      417 ``EXPECTATION_FAILED``
                                   only for a body within limits   (or 413, never ``100``)
=================================  ==============================  ==============================

A refusal never echoes the request's bytes: its reason is one of the fixed texts here. Each
port says how a refusal looks (:class:`RefusalShape`): the dealer's ports answer JSON
``{"error": CODE, "reason": text}`` with their security headers, the witness a line of text.
Every status line is ``HTTP/1.1``; a request of another version than 1.0 or 1.1
is refused (400). A client's mistake is never logged as an error: at most one
WARNING per peer per :data:`WARNING_INTERVAL_SECONDS`, with the count it stands for.

A full port sheds instead of refusing: a newcomer takes the place of the connection that has
waited longest without a request in progress, first among those that never completed a request
(a flood of idle or slow connections), then among kept-alive ones. A connection whose request's
headers have arrived, or whose answer is still leaving, is never shed; a client whose idle
kept-alive connection was shed opens another, as HTTP clients do after an idle close. So an idle
flood, from however many addresses, cannot shut honest clients out: they displace it.

Descriptors are the resource that, once spent, stops everything else the process does (the
gRPC port, health, the database). :func:`descriptor_limit` raises the soft ``RLIMIT_NOFILE`` to
the hard one at start, as Go's runtime does, and :func:`connection_cap` gives each HTTP port an
equal share of what is left after :data:`DESCRIPTOR_RESERVE`.

aiohttp gives no public hook for a connection's first moments, so :class:`EdgeProtocol` extends
its request handler; ``tests/web/test_http_edge.py`` holds each behaviour above to its number, so
an aiohttp release that moves these internals fails there, not in production.
"""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final

import structlog
from aiohttp import http_exceptions, web
from aiohttp.http import HttpVersion, HttpVersion10, HttpVersion11
from aiohttp.web_protocol import ERROR, RequestHandler

from gnau_service.edge.peers import PeerWarnings

log = structlog.get_logger("gnau.edge")

#: Connections one HTTP port keeps open at once, at most.
MAX_CONNECTIONS: Final = 1024
#: Connections from one peer address at once, on one port. Behind a proxy every client is the
#: proxy's address: size the proxy's pool below this.
MAX_CONNECTIONS_PER_PEER: Final = 64
#: Seconds a connection may stay open with no request in progress: from its opening, and from
#: the end of each answer.
IDLE_SECONDS: Final = 15.0
#: Seconds from a request's first byte to the end of its headers.
HEADER_SECONDS: Final = 10.0
#: Seconds a request's whole body may take to arrive.
BODY_SECONDS: Final = 10.0
#: Seconds in which an answer's unsent bytes must shrink: a client that stops reading is cut off.
ANSWER_SECONDS: Final = 10.0
#: Bytes of the request line, and of each header line.
MAX_LINE_BYTES: Final = 8190
#: Headers in one request.
MAX_HEADERS: Final = 128
#: Descriptors kept for everything but the HTTP ports: gRPC connections, the database, log
#: files, the worker threads.
DESCRIPTOR_RESERVE: Final = 256
#: The listen backlog of every HTTP port. asyncio accepts up to this many connections at one
#: wake-up before any of them is refused, so each port's share leaves room for them.
ACCEPT_BACKLOG: Final = 128
#: The fewest connections a port is given, however low the descriptor limit.
MIN_CONNECTIONS: Final = 16
#: At most one warning per peer in this many seconds.
WARNING_INTERVAL_SECONDS: Final = 60.0

#: The error code a refusal of each status carries.
ERROR_CODES: Final[Mapping[int, str]] = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "DEADLINE_EXCEEDED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    417: "EXPECTATION_FAILED",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}

_PARSER_REASONS: Final = (
    (http_exceptions.LineTooLong, f"a request line or header line is over {MAX_LINE_BYTES} bytes"),
    (http_exceptions.BadHttpMethod, "the request method is not an HTTP token"),
    (http_exceptions.BadStatusLine, "the request line is not HTTP/1.x"),
    (http_exceptions.InvalidURLError, "the request target is not a valid path"),
    (http_exceptions.InvalidHeader, "a header's name or value is not valid"),
    (http_exceptions.ContentEncodingError, "the body's Content-Encoding is not accepted"),
    (http_exceptions.TransferEncodingError, "the body's Transfer-Encoding framing is broken"),
    (http_exceptions.ContentLengthError, "the body's Content-Length framing is broken"),
)


def parser_reason(error: BaseException | None) -> str:
    """The fixed reason for a request aiohttp's parser refused; never the parser's own text,
    which quotes the request.

    >>> parser_reason(http_exceptions.LineTooLong("x" * 9000, "8190"))
    'a request line or header line is over 8190 bytes'
    >>> parser_reason(http_exceptions.BadHttpMessage("Too many headers: 129"))
    'the request is not valid HTTP/1.1 (bad framing, missing Host or too many headers)'
    """
    for kind, reason in _PARSER_REASONS:
        if isinstance(error, kind):
            return reason
    return "the request is not valid HTTP/1.1 (bad framing, missing Host or too many headers)"


@dataclass(frozen=True)
class RefusalShape:
    """How one port's refusals look: a content type, a body made from (code, reason), and the
    headers every answer of the port carries."""

    content_type: str
    body: Callable[[str, str], bytes]
    headers: Mapping[str, str] = field(default_factory=dict)

    def response(
        self, status: int, reason: str, *, error: str | None = None, close: bool = False
    ) -> web.Response:
        """The refusal; its code is ``error``, or the one :data:`ERROR_CODES` gives ``status``."""
        response = web.Response(
            status=status,
            body=self.body(error or ERROR_CODES.get(status, "REFUSED"), reason),
            headers={"Content-Type": self.content_type, "Cache-Control": "no-store"},
        )
        response.headers.update(self.headers)
        if close:
            response.force_close()
        return response

    def raw(self, status: int, reason: str) -> bytes:
        """The whole answer as bytes, for a connection refused before aiohttp parses anything."""
        body = self.body(ERROR_CODES.get(status, "REFUSED"), reason)
        headers = {
            "Content-Type": self.content_type,
            "Content-Length": str(len(body)),
            "Cache-Control": "no-store",
            "Connection": "close",
            **self.headers,
        }
        head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers.items()
        )
        return head.encode("ascii") + b"\r\n" + body


def json_body(error: str, reason: str) -> bytes:
    r"""``{"error": CODE, "reason": text}`` and a newline.

    >>> json_body("NOT_FOUND", "no such round")
    b'{"error": "NOT_FOUND", "reason": "no such round"}\n'
    """
    return json.dumps({"error": error, "reason": reason}, ensure_ascii=False).encode() + b"\n"


def text_body(error: str, reason: str) -> bytes:
    r"""The reason alone, as a line of text (the witness's shape).

    >>> text_body("NOT_FOUND", "unknown log origin")
    b'unknown log origin\n'
    """
    return reason.encode() + b"\n"


class RefusalError(Exception):
    """Raised by a handler (or :func:`read_body`) to answer with the port's refusal shape."""

    def __init__(self, status: int, reason: str, *, close: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.close = close


class ClientGoneError(Exception):
    """The client closed its connection before its body arrived: there is nobody to answer."""


async def read_body(request: web.Request, max_body_bytes: int) -> bytes:
    """The request's body, within :data:`BODY_SECONDS` and ``max_body_bytes`` (a chunked body
    is counted as it arrives), or :class:`RefusalError` / :class:`ClientGoneError`."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.content.iter_any():
                size += len(chunk)
                if size > max_body_bytes:
                    raise RefusalError(413, f"the body is over {max_body_bytes} bytes", close=True)
                chunks.append(chunk)
    except TimeoutError:
        raise RefusalError(
            408, f"the body did not arrive within {BODY_SECONDS:g} s", close=True
        ) from None
    except http_exceptions.HttpProcessingError as error:
        raise RefusalError(400, parser_reason(error), close=True) from None
    except ConnectionError:
        raise ClientGoneError from None
    return b"".join(chunks)


FULL_REASON: Final = "this port holds all the connections it can; retry later"


class ConnectionBudget:
    """Connections open on one port, in total and by peer address."""

    def __init__(self, cap: int, per_peer: int = MAX_CONNECTIONS_PER_PEER) -> None:
        self.cap = cap
        self.per_peer = per_peer
        self.open = 0
        self._by_peer: dict[str, int] = {}

    @property
    def full(self) -> bool:
        return self.open >= self.cap

    def admit(self, peer: str) -> tuple[int, str] | None:
        """Count a new connection in, or the (status, reason) that refuses it."""
        if self.full:
            return 503, FULL_REASON
        held = self._by_peer.get(peer, 0)
        if held >= self.per_peer:
            return 429, f"your address holds {self.per_peer} connections already"
        self._by_peer[peer] = held + 1
        self.open += 1
        return None

    def release(self, peer: str) -> None:
        held = self._by_peer.pop(peer, 0) - 1
        if held > 0:
            self._by_peer[peer] = held
        self.open -= 1


def descriptor_limit() -> int:
    """The soft ``RLIMIT_NOFILE``, first raised to the hard limit where that is allowed (a
    seccomp filter may refuse even the read: then 1024, systemd's default, is assumed)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except OSError:
        return 1024
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def connection_cap(descriptors: int, ports: int) -> int:
    """Connections each of ``ports`` HTTP ports may hold under a ``descriptors`` limit: an equal
    share of what the reserve and the ports' accept backlogs leave.

    >>> connection_cap(1024, 2), connection_cap(1024, 1), connection_cap(65536, 2)
    (256, 640, 1024)
    >>> connection_cap(200, 1)
    16
    """
    ports = max(ports, 1)
    share = (descriptors - DESCRIPTOR_RESERVE - ports * ACCEPT_BACKLOG) // ports
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, share))


@dataclass(frozen=True)
class EdgeLimits:
    """One port's settings: its connection cap, its largest body, its refusal shape."""

    connections: int
    shape: RefusalShape
    max_body_bytes: int = 0
    name: str = "http"


def _peer(transport: asyncio.BaseTransport) -> str:
    where = transport.get_extra_info("peername")
    if isinstance(where, tuple) and where:
        return str(where[0])
    return "local"


class EdgeProtocol(RequestHandler):
    """aiohttp's request handler, with the connection budget, the header deadline and
    refusals in the port's shape."""

    def __init__(self, edge: EdgeServer, **kwargs: Any) -> None:
        super().__init__(edge, **kwargs)
        self._edge = edge
        self._peer_address = "local"
        self._admitted = False
        #: Counted in the port's budget (until it is lost, or shed).
        self._counted = False
        self._in_request = False
        self._header_deadline: asyncio.TimerHandle | None = None
        self._answer_deadline: asyncio.TimerHandle | None = None
        #: Set when aiohttp parsed a request it cannot then represent (``CONNECT`` with an
        #: empty target): the request is answered 400 instead of ending the connection's task.
        self.unreadable_request = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        edge = self._edge
        self._peer_address = _peer(transport)
        # Decided here, as each connection is counted in: asyncio accepts a burst of them
        # before any is made.
        if edge.budget.full:
            edge.shed_one()
        refused = edge.budget.admit(self._peer_address)
        if refused is not None:
            status, reason = refused
            edge.refused(self._peer_address, status, "connection")
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(edge.limits.shape.raw(status, reason))
            transport.close()
            return
        self._admitted = self._counted = True
        edge.waiting(self, fresh=True)
        super().connection_made(transport)

    @property
    def sheddable(self) -> bool:
        """Not mid-request: no request's handler running, no answer still leaving."""
        transport = self.transport
        return (
            self._counted
            and not self._in_request
            and (transport is None or transport.get_write_buffer_size() == 0)
        )

    def shed(self) -> None:
        """Close this connection to make room for a newcomer; its place is free at once."""
        self._counted = False
        self._edge.budget.release(self._peer_address)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self._admitted:
            return
        self._admitted = False
        self._edge.gone(self)
        if self._counted:
            self._counted = False
            self._edge.budget.release(self._peer_address)
        self._cancel_header_deadline()
        if self._answer_deadline is not None:
            self._answer_deadline.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if not self._in_request and self._header_deadline is None:
            self._header_deadline = self._loop.call_later(HEADER_SECONDS, self._headers_too_slow)
        super().data_received(data)

    def request_started(self) -> None:
        self._in_request = True
        self._edge.gone(self)
        self._cancel_header_deadline()

    def request_finished(self) -> None:
        """The handler has returned; aiohttp now writes its answer, which must keep leaving:
        unsent bytes that did not shrink in :data:`ANSWER_SECONDS` (a client that stopped
        reading) end the connection."""
        self._in_request = False
        if self._admitted:
            self._edge.waiting(self, fresh=False)
        if self._answer_deadline is None:
            self._answer_deadline = self._loop.call_later(ANSWER_SECONDS, self._answer_check, None)

    def _answer_check(self, unsent_before: int | None) -> None:
        self._answer_deadline = None
        transport = self.transport
        unsent = 0 if transport is None else transport.get_write_buffer_size()
        if transport is None or unsent == 0:
            return
        if unsent_before is not None and unsent >= unsent_before:
            self._edge.refused(self._peer_address, 408, "answer")
            transport.abort()
            return
        self._answer_deadline = self._loop.call_later(ANSWER_SECONDS, self._answer_check, unsent)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self._in_request or self.transport is None:
            return
        self._edge.refused(self._peer_address, 408, "headers")
        reason = f"the request's headers did not arrive within {HEADER_SECONDS:g} s"
        self.transport.write(self._edge.limits.shape.raw(408, reason))
        self.force_close()

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was sent already")
        # The parser's stand-in request says HTTP/1.0; the answer is HTTP/1.1 like every other.
        request._version = HttpVersion11
        if status == 500:
            log.error("http_handler_failed", port=self._edge.limits.name, exc_info=exc)
            reason = "internal error"
        elif status == 504:
            reason = "the answer took too long"
        else:
            self._edge.refused(self._peer_address, status, "parser")
            reason = parser_reason(exc)
        return self._edge.limits.shape.response(status, reason, close=True)


_Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


class EdgeServer(web.Server):
    """aiohttp's low-level server, making :class:`EdgeProtocol` connections and checking each
    request's declared body, encoding and ``Expect`` before the application sees it."""

    def __init__(self, handler: _Handler, limits: EdgeLimits, **kwargs: Any) -> None:
        super().__init__(self._checked, **kwargs)
        self._inner = handler
        self._plain_request = self.request_factory
        self.request_factory = self._request_or_stand_in
        self.limits = limits
        self.budget = ConnectionBudget(limits.connections)
        self.warnings = PeerWarnings(WARNING_INTERVAL_SECONDS)
        #: Connections with no request in progress, longest waiting first: those that never
        #: completed a request, and those kept alive after one.
        self._fresh: dict[EdgeProtocol, None] = {}
        self._kept: dict[EdgeProtocol, None] = {}
        #: Connections shed for newcomers since the start.
        self.shed_total = 0

    # aiohttp uses the server only as the listener's protocol factory: any protocol will do.
    def __call__(self) -> asyncio.Protocol:  # type: ignore[override]
        return EdgeProtocol(self, loop=self._loop, **self._kwargs)

    def waiting(self, protocol: EdgeProtocol, *, fresh: bool) -> None:
        """``protocol`` has no request in progress: it may be shed, after those waiting longer."""
        self.gone(protocol)
        (self._fresh if fresh else self._kept)[protocol] = None

    def gone(self, protocol: EdgeProtocol) -> None:
        """``protocol`` is mid-request, or closed: never shed."""
        self._fresh.pop(protocol, None)
        self._kept.pop(protocol, None)

    def shed_one(self) -> bool:
        """Close the connection that has waited longest without a request (a fresh one first),
        if there is one not mid-request."""
        for waiting in (self._fresh, self._kept):
            for protocol in waiting:
                if protocol.sheddable:  # else its answer is still leaving: it stays
                    del waiting[protocol]
                    protocol.shed()
                    self.shed_total += 1
                    count = self.warnings.due(protocol._peer_address)
                    if count is not None:
                        log.warning(
                            "http_shed",
                            port=self.limits.name,
                            peer=protocol._peer_address,
                            reason="the port was full; this connection had no request in progress",
                            refusals=count,
                        )
                    return True
        return False

    def refused(self, peer: str, status: int, where: str) -> None:
        """Count a refusal that is the client's doing; warn for its peer when one is due."""
        count = self.warnings.due(peer)
        if count is not None:
            log.warning(
                "http_refused",
                port=self.limits.name,
                peer=peer,
                status=status,
                where=where,
                refusals=count,
            )

    def _request_or_stand_in(
        self,
        message: Any,
        payload: Any,
        protocol: Any,
        writer: Any,
        task: Any,
    ) -> web.BaseRequest:
        try:
            return self._plain_request(message, payload, protocol, writer, task)
        except Exception:  # a message aiohttp's parser let through but its request cannot hold
            if isinstance(protocol, EdgeProtocol):
                protocol.unreadable_request = True
            return self._plain_request(ERROR, payload, protocol, writer, task)

    async def _checked(self, request: web.BaseRequest) -> web.StreamResponse:
        protocol = request.protocol
        if isinstance(protocol, EdgeProtocol):
            protocol.request_started()
        # The answer is HTTP/1.1 whatever the request said (the server's own version, as
        # RFC 9110 asks); a request that is not HTTP/1.0 or 1.1 is refused below.
        asked = request._version
        request._version = HttpVersion11
        request._cache.pop("version", None)  # the property is cached once read
        try:
            refusal = self._refusal_before_work(request, asked)
            if refusal is not None:
                self.refused(_peer_of_request(request), refusal.status, "request")
                raise refusal
            return await self._inner(request)
        except RefusalError as refusal:
            return self.limits.shape.response(refusal.status, refusal.reason, close=refusal.close)
        except web.HTTPException as error:
            # Raised before the application's own middleware: an Expect handler, a size check.
            return self.limits.shape.response(error.status, error.reason)
        finally:
            if isinstance(protocol, EdgeProtocol):
                protocol.request_finished()

    def _refusal_before_work(
        self, request: web.BaseRequest, version: HttpVersion
    ) -> RefusalError | None:
        protocol = request.protocol
        if isinstance(protocol, EdgeProtocol) and protocol.unreadable_request:
            protocol.unreadable_request = False
            return RefusalError(400, "the request target is not a valid path", close=True)
        if version not in (HttpVersion10, HttpVersion11):
            return RefusalError(400, "only HTTP/1.0 and HTTP/1.1 are spoken here", close=True)
        most = self.limits.max_body_bytes
        declared = request.content_length
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        if (declared is not None and declared > most) or (chunked and most == 0):
            what = "no request body" if most == 0 else f"a body of at most {most} bytes"
            return RefusalError(413, f"this port takes {what}", close=True)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            return RefusalError(415, "request bodies must not be compressed", close=True)
        expect = request.headers.get("Expect")
        if expect is not None and expect.strip().lower() != "100-continue":
            return RefusalError(417, "only Expect: 100-continue is understood", close=True)
        return None


def _peer_of_request(request: web.BaseRequest) -> str:
    transport = request.transport
    return "local" if transport is None else _peer(transport)


class EdgeRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose server is an :class:`EdgeServer`."""

    def __init__(self, app: web.Application, limits: EdgeLimits, shutdown_timeout: float) -> None:
        # aiohttp waits up to its shutdown timeout twice (for the handler, then for its task):
        # half each keeps the whole stop within the grace the caller was given.
        super().__init__(
            app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout / 2
        )
        self.limits = limits
        self.edge: EdgeServer | None = None

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        self.edge = EdgeServer(
            made.request_handler,
            self.limits,
            request_factory=made.request_factory,
            access_log=None,
            keepalive_timeout=IDLE_SECONDS,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            max_headers=MAX_HEADERS,
            lingering_time=0,
            auto_decompress=False,
        )
        return self.edge
