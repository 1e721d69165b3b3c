"""The witness's HTTP server: ``POST <prefix>/add-checkpoint`` as C2SP tlog-witness specifies.

Checks, in the spec's order; every refusal is a short ``text/plain`` reason except 409:

====  ==============================================================================
400   the body is malformed (old-size line, proof lines, no empty line, a note or
      checkpoint that does not parse), or ``old`` is larger than the checkpoint's size
403   no signature from a key trusted for the origin verifies (or one of them fails)
404   the origin is not a log this witness follows
409   ``old`` is not the latest cosigned size, or the sizes match but the roots do
      not; the body is the latest size and a newline, ``Content-Type: text/x.tlog.size``
404   (also) any other path; 405 any other method on the path
408   the body did not arrive within the edge's body timeout
413   the body is larger than :data:`~gnau_service.audit.witness_protocol.MAX_REQUEST_BYTES`,
      refused before any of it is read when its length is declared (never ``100 Continue``)
415   the body has a ``Content-Encoding``: compressed bodies are refused, never inflated
422   the consistency proof does not verify
503   the database cannot be used now (nothing was recorded or cosigned)
200   the cosignature line(s), ``— <witness name> base64(key ID || time || signature)``
====  ==============================================================================

The port is held to the limits of :mod:`gnau_service.edge.http` (connections, idle, header and
body timeouts, refusals before work); its parser's refusals take the same text shape.

Every refusal of a validly signed checkpoint (400 for ``old`` too large, 409, 422) is recorded
as evidence (:mod:`~gnau_service.witness.state`): every fork for good, the rest within its
caps. The check and the record happen in one database transaction, run in a worker thread so
that a slow disk never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import structlog
from aiohttp import web

from gnau_service.audit.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from gnau_service.audit.cosignature import WitnessSigner
from gnau_service.audit.note import NoteError, SignedNote
from gnau_service.audit.witness_protocol import (
    ADD_CHECKPOINT_PATH,
    COSIGNATURE_CONTENT_TYPE,
    MAX_REQUEST_BYTES,
    SIZE_CONTENT_TYPE,
    MalformedRequestError,
    parse_add_checkpoint,
)
from gnau_service.edge.http import (
    ACCEPT_BACKLOG,
    ClientGoneError,
    EdgeLimits,
    EdgeRunner,
    RefusalError,
    RefusalShape,
    connection_cap,
    descriptor_limit,
    read_body,
    text_body,
)
from gnau_service.witness.logs import TrustedLogs
from gnau_service.witness.state import WitnessState, WitnessStateError
from gnau_service.witness.verdict import Refused

log = structlog.get_logger("gnau.witness")

#: The longest reason a refusal's body carries; reasons quote the request only in short slices.
MAX_REASON_CHARS: Final = 400

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Witness:
    """What the server needs: the key that cosigns, the logs it follows, its database."""

    signer: WitnessSigner
    logs: TrustedLogs
    state: WitnessState
    clock: Clock = utc_now


#: Every refusal's shape: the reason, a line of plain text.
TEXT_REFUSALS: Final = RefusalShape("text/plain; charset=utf-8", text_body)
#: Seconds a stop waits for requests in flight; below the shipped unit's ``TimeoutStopSec=15``.
GRACE_SECONDS: Final = 10.0


def _refusal(status: int, reason: str, *, close: bool = False) -> web.Response:
    return TEXT_REFUSALS.response(status, reason[:MAX_REASON_CHARS], close=close)


def witness_app(witness: Witness) -> web.Application:
    """The aiohttp application: one route, every refusal a line of text."""
    app = web.Application(middlewares=[_no_tracebacks])
    app.router.add_post(witness.logs.prefix + ADD_CHECKPOINT_PATH, _handler(witness))
    return app


@web.middleware
async def _no_tracebacks(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as error:
        # Fixed reasons: aiohttp's own would quote the method or the path.
        if error.status == 405:
            return _refusal(405, "only POST is allowed here")
        if error.status == 404:
            return _refusal(404, f"the only endpoint is POST <prefix>{ADD_CHECKPOINT_PATH}")
        return _refusal(error.status, error.reason)
    except RefusalError:
        raise  # the edge answers it, in this port's shape
    except Exception:
        log.exception("add_checkpoint_failed")
        return _refusal(500, "internal error")


def _handler(witness: Witness) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def add_checkpoint(request: web.Request) -> web.Response:
        try:
            body = await read_body(request, MAX_REQUEST_BYTES)
        except ClientGoneError:
            return _refusal(400, "the client closed the connection", close=True)
        return await handle_add_checkpoint(witness, body)

    return add_checkpoint


async def handle_add_checkpoint(witness: Witness, body: bytes) -> web.Response:
    """The response to one add-checkpoint body."""
    try:
        submitted = parse_add_checkpoint(body)
        note = SignedNote.parse(submitted.note)
        origin = Checkpoint.parse(note.text).origin
    except (MalformedRequestError, NoteError, CheckpointError) as error:
        return _refusal(400, f"malformed request: {error}")
    keys = witness.logs.keys_for(origin)
    if keys is None:
        return _refusal(404, f"unknown log origin {origin[:100]!r}")
    try:
        signed = open_checkpoint(submitted.note, origin, keys)
    except NoteError as error:
        return _refusal(403, f"no trusted signature verifies: {error}")
    try:
        outcome = await asyncio.to_thread(
            witness.state.add_checkpoint,
            signed,
            submitted.old_size,
            submitted.proof,
            witness.signer,
            witness.clock(),
        )
    except WitnessStateError as error:
        log.error("witness_database_unavailable", error=str(error)[:MAX_REASON_CHARS])
        return _refusal(503, "the witness database is unavailable; try again later")
    if isinstance(outcome, Refused):
        log.warning(
            "checkpoint_refused",
            origin=origin,
            size=signed.checkpoint.size,
            old_size=submitted.old_size,
            refusal=outcome.refusal.value,
            status=outcome.status,
        )
        if outcome.status == 409:
            return web.Response(
                status=409,
                body=f"{outcome.latest_size}\n".encode("ascii"),
                headers={"Content-Type": SIZE_CONTENT_TYPE},
            )
        return _refusal(outcome.status, outcome.reason)
    log.info("checkpoint_cosigned", origin=origin, size=signed.checkpoint.size)
    return web.Response(
        status=200,
        body=outcome.line.encode("utf-8"),
        headers={"Content-Type": COSIGNATURE_CONTENT_TYPE},
    )


@dataclass
class RunningWitness:
    """A started server: where it listens, and how to stop it."""

    runner: EdgeRunner
    addresses: list[tuple[str, int]]

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_witness(
    witness: Witness, host: str, port: int, *, connections: int | None = None
) -> RunningWitness:
    """Bind ``host:port`` (0 picks a free port) and serve until :meth:`RunningWitness.stop`,
    holding at most ``connections`` at once (by default, what the descriptor limit allows)."""
    if connections is None:
        connections = connection_cap(descriptor_limit(), 1)
    limits = EdgeLimits(connections, TEXT_REFUSALS, MAX_REQUEST_BYTES, name="witness")
    runner = EdgeRunner(witness_app(witness), limits, GRACE_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, backlog=ACCEPT_BACKLOG)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    addresses = [(str(address[0]), int(address[1])) for address in runner.addresses]
    return RunningWitness(runner, addresses)


async def serve_until_signalled(
    witness: Witness, host: str, port: int, on_ready: Callable[[RunningWitness], None]
) -> None:
    """Serve until SIGTERM or SIGINT, then finish the requests in flight (for at most
    :data:`GRACE_SECONDS`) and stop."""
    descriptors = descriptor_limit()
    connections = connection_cap(descriptors, 1)
    running = await start_witness(witness, host, port, connections=connections)
    log.info(
        "witness_serving",
        descriptors=descriptors,
        connections=connections,
        grace_seconds=GRACE_SECONDS,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    on_ready(running)
    try:
        await stop.wait()
    finally:
        await running.stop()
