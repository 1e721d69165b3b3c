"""The optional HTTP port: the browser verifier page and the public data it reads.

Off unless ``--http-listen`` is set. Read-only (GET and HEAD; anything else is 405) and public:
it answers as the gRPC ``public`` role does, so a round whose seed is not public yet does not
exist here either. ``docs/web.md`` lists the routes.

- ``GET /`` and the page's files (``gnau_service/web/``, read once at start, so no request
  names a path on disk);
- ``GET /rounds/{round_id}/receipt[?pinned_size=N]``: the round's receipt (``docs/receipts.md``);
- ``GET /rounds?table_id=T[&page_size=N][&page_token=...]``: revealed, settled and voided rounds,
  newest first, if ``--public-round-listing`` is on; otherwise 403 (a round id is the
  capability to read its receipt: nothing here enumerates rounds);
- ``GET /keys``: the log's origin, verifier keys and key rotations;
- ``GET /log/checkpoint`` and ``GET /log/tile/...``: the log as C2SP tlog-tiles
  (:mod:`gnau_service.store.tiles`): hash tiles and checkpoints for anyone, an entry bundle once
  every round in it has a public seed (403 before);
- ``GET /metrics``: the Prometheus metrics (:mod:`~gnau_service.server.process.metrics`), which a
  metrics-only port (``--metrics-listen``) also serves, alone.

Every refusal is a small JSON object ``{"error": CODE, "reason": text}``, never a traceback.
The port is bound before the service creates anything (:meth:`WebServer.bind`), like the gRPC
port, and closed in the graceful stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Final, Protocol

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gnau_service.audit.tiles import (
    CHECKPOINT_CACHE_CONTROL,
    CHECKPOINT_PATH,
    TILE_CACHE_CONTROL,
    TILE_CONTENT_TYPE,
    TileError,
    parse_tile_path,
)
from gnau_service.edge.addresses import split_host_port
from gnau_service.edge.http import (
    ACCEPT_BACKLOG,
    ERROR_CODES,
    EdgeLimits,
    EdgeRunner,
    EdgeServer,
    RefusalShape,
    json_body,
)
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.limits import MAX_ERROR_MESSAGE_BYTES
from gnau_service.rounds.receipt_gathering import key_rotation_notes, round_receipt
from gnau_service.rounds.refusals import (
    DealerError,
    InvalidRequest,
    ListingNotPublic,
    OutOfRange,
    RoundNotFound,
)
from gnau_service.rounds.view import RoundView
from gnau_service.store import Store, StoreUnavailable
from gnau_service.store.cosignatures import CheckpointNote, WitnessQuorum, served_checkpoint
from gnau_service.store.tiles import BundleNotPublic, FullTiles, TileNotCovered

log = structlog.get_logger("gnau.web")

#: The page may only load what this origin serves, and run no inline script: a receipt is data
#: from strangers, so the page never turns any of it into markup or code.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
#: ES modules must be served as JavaScript, or the browser refuses to run them.
CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}


class Scrapeable(Protocol):
    """What a ``/metrics`` port serves: :class:`~gnau_service.server.process.metrics.Metrics`, or
    every worker's (:class:`~gnau_service.server.process.worker_metrics.WorkerMetrics`)."""

    def exposition(self) -> bytes:
        """The text exposition (may read the database: call it off the loop)."""
        ...


JSON_CONTENT_TYPE: Final = "application/json"
#: Where the log's tiles are served (C2SP tlog-tiles; ``docs/audit.md``, "Tiles").
TILES_PREFIX: Final = "/log/"
#: The largest ``pinned_size`` digit string read; a size of the log never has more digits.
MAX_SIZE_DIGITS: Final = 20

_READ_METHODS: Final = frozenset({"GET", "HEAD"})


class WebServer:
    """The HTTP port: bound by :meth:`bind` before anything else exists, serving once
    :meth:`start` has the dealer, stopped by :meth:`stop` (or :meth:`close` if never started)."""

    def __init__(self, listener: socket.socket, address: str) -> None:
        self._listener = listener
        self.address = address
        name = listener.getsockname()
        self.port: int = name[1] if isinstance(name, tuple) else 0  # 0: a Unix socket
        self._runner: EdgeRunner | None = None

    @classmethod
    def bind(
        cls, address: str, flag: str = "--http-listen", *, reuse_port: bool = False
    ) -> WebServer:
        """Listen on ``host:port`` now; a busy or bad address raises :class:`OSError`, naming
        the ``flag`` that asked for it. With ``reuse_port`` (a worker of ``--workers``), share
        the port with the other workers, whose supervisor holds it."""
        host, port = split_host_port(address)
        try:
            family, kind, protocol, _, where = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            listener = socket.socket(family, kind, protocol)
        except OSError as error:
            raise OSError(error.errno, f"{flag} {address}: {error.strerror}") from None
        # As the gRPC port: a second service on a taken port fails to start.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        return cls(_listening(listener, where, f"{flag} {address}"), address)

    @classmethod
    def bind_unix(cls, path: str) -> WebServer:
        """Listen on a Unix socket at ``path`` (owner-only: the process's umask is 077)."""
        # A killed worker leaves its socket behind; its successor takes the path over.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return cls(_listening(socket.socket(socket.AF_UNIX), path, path), path)

    async def start(
        self,
        dealer: Dealer,
        store: Store,
        shutdown_timeout: float,
        metrics: Scrapeable | None,
        quorum: WitnessQuorum,
        *,
        connections: int,
        public_round_listing: bool = False,
    ) -> None:
        application = web_application(
            dealer, store, metrics, quorum, public_round_listing=public_round_listing
        )
        await self.serve(application, shutdown_timeout, connections=connections, name="page")

    async def serve(
        self,
        application: web.Application,
        shutdown_timeout: float,
        *,
        connections: int,
        name: str = "metrics",
    ) -> None:
        """Serve ``application`` within the edge's limits (:mod:`gnau_service.edge.http`),
        holding at most ``connections`` at once; the port takes no request body."""
        limits = EdgeLimits(connections, JSON_REFUSALS, max_body_bytes=0, name=name)
        runner = EdgeRunner(application, limits, shutdown_timeout)
        await runner.setup()
        self._runner = runner
        await web.SockSite(runner, self._listener, backlog=ACCEPT_BACKLOG).start()

    @property
    def edge(self) -> EdgeServer | None:
        """The running server's connection budget and warnings, once started."""
        return None if self._runner is None else self._runner.edge

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (within the shutdown timeout), close."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._listener.close()

    def close(self) -> None:
        """Release the port of a server that never started."""
        self._listener.close()


def _listening(listener: socket.socket, where: tuple[Any, ...] | str, named: str) -> socket.socket:
    """``listener`` bound to ``where`` and listening, not blocking; on failure it is closed and
    an OSError says why, after ``named`` (the setting, or the path)."""
    try:
        listener.bind(where)
        listener.listen(ACCEPT_BACKLOG)
    except OSError as error:
        listener.close()
        raise OSError(error.errno, f"{named}: {error.strerror}") from None
    listener.setblocking(False)
    return listener


def web_application(
    dealer: Dealer,
    store: Store,
    metrics: Scrapeable | None,
    quorum: WitnessQuorum,
    *,
    public_round_listing: bool = False,
) -> web.Application:
    app = web.Application(middlewares=[_edge])
    routes = _Routes(dealer, store, quorum, public_round_listing)
    if metrics is not None:
        app.router.add_get("/metrics", metrics_handler(metrics))
    app.router.add_get("/rounds", routes.list_rounds)
    # A round id may hold "/" (sent as %2F, which the router sees decoded): match to the suffix.
    # It may hold any character, a newline too, so that validation refuses it (400), not the router.
    app.router.add_get(r"/rounds/{round_id:[\s\S]+}/receipt", routes.receipt)
    app.router.add_get("/keys", routes.keys)
    app.router.add_get(f"{TILES_PREFIX}{CHECKPOINT_PATH}", routes.checkpoint)
    app.router.add_get(f"{TILES_PREFIX}{{path:tile/.*}}", routes.tile)
    app.router.add_get("/{path:.*}", routes.static)
    return app


def metrics_application(metrics: Scrapeable) -> web.Application:
    """A port that serves only ``GET /metrics`` (``--metrics-listen``)."""
    app = web.Application(middlewares=[_edge])
    app.router.add_get("/metrics", metrics_handler(metrics))
    return app


def metrics_handler(metrics: Scrapeable) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def scrape(request: web.Request) -> web.Response:
        # A scrape reads the database (the log's size, the open rounds): off the event loop.
        body = await asyncio.to_thread(metrics.exposition)
        return web.Response(
            body=body, headers={"Content-Type": CONTENT_TYPE_LATEST, "Cache-Control": "no-store"}
        )

    return scrape


class _Routes:
    def __init__(
        self, dealer: Dealer, store: Store, quorum: WitnessQuorum, public_round_listing: bool
    ) -> None:
        self._dealer = dealer
        self._store = store
        self._quorum = quorum
        self._public_round_listing = public_round_listing
        self._files = page_files()
        self._full_tiles = FullTiles()
        self._checkpoint_read: asyncio.Future[CheckpointNote | None] | None = None

    async def receipt(self, request: web.Request) -> web.Response:
        pinned_size = _pinned_size(request.query.get("pinned_size", "0"))
        receipt = await asyncio.to_thread(
            functools.partial(
                round_receipt,
                self._dealer,
                request.match_info["round_id"],
                operator=None,  # the public's: a revealed round of any operator, by its id
                public=True,
                pinned_size=pinned_size,
                quorum=self._quorum,
            )
        )
        return _json_response(receipt.to_text())

    async def list_rounds(self, request: web.Request) -> web.Response:
        if not self._public_round_listing:
            raise ListingNotPublic
        query = request.query
        page_size = _count(query.get("page_size", "0"), "page_size")
        views, token = await asyncio.to_thread(
            functools.partial(
                self._dealer.list,
                query.get("table_id", ""),
                page_size,
                query.get("page_token", ""),
                operator=None,  # the public lists every operator's revealed rounds, if at all
                public=True,
            )
        )
        body = {"rounds": [_round_summary(view) for view in views], "next_page_token": token}
        return _json_response(json.dumps(body, ensure_ascii=False))

    async def keys(self, request: web.Request) -> web.Response:
        store = self._store
        vkeys = await asyncio.to_thread(store.public_keys)
        rotations = await asyncio.to_thread(key_rotation_notes, store)
        body = {
            "origin": store.signer.origin,
            "verifier_keys": vkeys,
            "key_rotations": list(rotations),
            "witness_keys": list(self._quorum.witnesses),
            "witness_quorum": self._quorum.threshold,
            "warning": "a key fetched from the operator proves nothing about the operator: "
            "pin one you got another way",
        }
        return _json_response(json.dumps(body, ensure_ascii=False))

    async def checkpoint(self, request: web.Request) -> web.Response:
        # Callers that arrive while a read is in flight share it (the checkpoint it reads is at
        # most that read's age, well within the max-age a cache may add): a crowd of monitors
        # costs the store one read at a time.
        if self._checkpoint_read is None or self._checkpoint_read.done():
            self._checkpoint_read = asyncio.ensure_future(
                asyncio.to_thread(served_checkpoint, self._store, self._quorum, cosigned=True)
            )
            # Its callers may all be gone (disconnected) when a read fails: the failure is theirs
            # to see, not an "exception never retrieved" in the service's log.
            self._checkpoint_read.add_done_callback(_retrieved)
        served = await asyncio.shield(self._checkpoint_read)
        if served is None:
            raise web.HTTPNotFound(reason="the log has signed no checkpoint yet")
        return web.Response(
            text=served.note,
            content_type="text/plain",
            charset="utf-8",
            headers={"Cache-Control": CHECKPOINT_CACHE_CONTROL},
        )

    async def tile(self, request: web.Request) -> web.Response:
        try:
            ref = parse_tile_path(request.match_info["path"])
        except TileError as error:
            raise web.HTTPNotFound(reason=f"not a tile: {error}") from None
        try:
            # A hot tile is answered from memory without a worker thread's round trip.
            body = self._full_tiles.cached(ref) or await asyncio.to_thread(
                self._full_tiles.read, self._store, ref
            )
        except TileNotCovered as error:
            raise web.HTTPNotFound(reason=str(error)) from None
        except BundleNotPublic as error:
            raise web.HTTPForbidden(reason=str(error)) from None
        return web.Response(
            body=body,
            content_type=TILE_CONTENT_TYPE,
            headers={"Cache-Control": TILE_CACHE_CONTROL},
        )

    async def static(self, request: web.Request) -> web.Response:
        path = request.match_info["path"] or "index.html"
        found = self._files.get(path)
        if found is None:
            # The path is not echoed: it may hold a round id someone is guessing.
            raise web.HTTPNotFound(reason="there is no page file at this path")
        body, content_type = found
        return web.Response(
            body=body, headers={"Content-Type": content_type, "Cache-Control": "no-cache"}
        )


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def page_files() -> dict[str, tuple[bytes, str]]:
    """Every file of the page (``gnau_service/web``), by its path under ``/``, with its
    content type. Files of other types are not served."""
    root = resources.files("gnau_service") / "web"
    return {
        path: (entry.read_bytes(), CONTENT_TYPES[suffix])
        for path, entry in _walk(root, "")
        if (suffix := path[path.rfind(".") :]) in CONTENT_TYPES
    }


def _walk(directory: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for entry in directory.iterdir():
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        elif entry.is_file():
            yield f"{prefix}{entry.name}", entry


def _round_summary(view: RoundView) -> dict[str, object]:
    record = view.record
    return {
        "round_id": record.round_id,
        "table_id": record.table_id,
        "state": str(record.state),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "seats": len(record.seats),
    }


def _pinned_size(text: str) -> int:
    return _count(text, "pinned_size")


def _count(text: str, name: str) -> int:
    """A query parameter that is a count: plain decimal digits."""
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_SIZE_DIGITS):
        raise InvalidRequest([(name, "must be a whole number written in decimal digits")])
    return int(text)


def _json_response(text: str, status: int = 200) -> web.Response:
    return web.Response(
        text=text if text.endswith("\n") else text + "\n",
        status=status,
        content_type=JSON_CONTENT_TYPE,
        charset="utf-8",
        headers={"Cache-Control": "no-store"},
    )


#: Every refusal of the page and metrics ports, from the application or from the edge itself.
JSON_REFUSALS: Final = RefusalShape("application/json; charset=utf-8", json_body, SECURITY_HEADERS)


def error_response(status: int, error: str, reason: str) -> web.Response:
    """``{"error": ..., "reason": ...}``, the reason cut to a bounded size."""
    return JSON_REFUSALS.response(status, _bounded(reason), error=error)


def _bounded(text: str) -> str:
    data = text.encode("utf-8", errors="replace")
    if len(data) <= MAX_ERROR_MESSAGE_BYTES:
        return text
    return data[: MAX_ERROR_MESSAGE_BYTES - 3].decode("utf-8", errors="ignore") + "…"


@web.middleware
async def _edge(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Read-only, public, JSON refusals, and the security headers on every answer."""
    response: web.StreamResponse
    if request.method not in _READ_METHODS:
        response = error_response(
            405, "METHOD_NOT_ALLOWED", f"this port is read-only: {request.method} is not allowed"
        )
        response.headers["Allow"] = "GET, HEAD"
    else:
        try:
            response = await handler(request)
        except web.HTTPException as error:
            response = error_response(
                error.status, ERROR_CODES.get(error.status, "REFUSED"), error.reason
            )
        except (DealerError, StoreUnavailable) as error:
            response = _refusal(error)
        except Exception:
            # Never a traceback to the client: the log has it, the client a plain line.
            log.exception("internal error", path=request.path[:200])
            response = error_response(500, "INTERNAL", "internal error")
    response.headers.update(SECURITY_HEADERS)
    return response


def _refusal(error: DealerError | StoreUnavailable) -> web.Response:
    if isinstance(error, InvalidRequest):
        return error_response(400, "INVALID_ARGUMENT", str(error))
    if isinstance(error, RoundNotFound):
        return error_response(404, "NOT_FOUND", str(error))
    if isinstance(error, OutOfRange):
        return error_response(400, "OUT_OF_RANGE", str(error))
    if isinstance(error, ListingNotPublic):
        return error_response(403, "PERMISSION_DENIED", str(error))
    if isinstance(error, StoreUnavailable):
        # The cause stays in the server's log: it may name paths or hosts.
        return error_response(503, "UNAVAILABLE", "the store cannot be used right now; retry")
    return error_response(400, "REFUSED", str(error))
