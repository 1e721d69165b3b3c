"""One interceptor for every call: request id, decoding, shutdown, authorisation, stream slots,
error mapping, one log line.

It wraps each method's handler once, whatever its shape (unary or streaming requests, unary or
streaming responses, and a streaming response produced by an async generator or written with
``context.write``, as the health service's Watch does), with grpc's own handler factories. The
wrapped handler runs every step below *inside* the call, where contextvars (structlog's
included) propagate: values set in ``intercept_service`` itself do not reach the handler
(grpc/grpc#33071).

Every method is served in its request-streaming shape (the same on the wire), so that grpc
starts the call as its headers arrive: the checks below come before its request is read, and a
call refused by them costs no read, no decoding and no waiting for a body that never comes.

1. The request id: the client's ``x-request-id`` if it is short printable ASCII, else a fresh
   one; bound to every log line of the call and returned in the trailers.
2. During shutdown, every call but a health check is refused (UNAVAILABLE).
3. The caller (:class:`~gnau_service.server.grpc.auth.Caller`), from a bearer token or an mTLS
   name, must have a role allowed the method, and an operator the method allows (the log's
   entries are every operator's); its role, actor and operator are set for the servicers
   (:data:`current_role`, :data:`current_actor`, :data:`current_operator`).
4. The call takes a slot of its caller's share, and a stream one more
   (:mod:`~gnau_service.server.grpc.shares`, :mod:`~gnau_service.server.grpc.streams`); a unary
   call is counted so that shutdown can wait for it.
5. Only then is the request read: its one message within
   :data:`~gnau_service.edge.grpc_port.REQUEST_SECONDS` (DEADLINE_EXCEEDED, ``REQUEST_TOO_SLOW``),
   up to the port's largest request. One that does not decode is refused (INVALID_ARGUMENT),
   with at most one warning per peer per minute: the deserializer never raises (grpc would
   answer UNKNOWN and log a traceback), it hands over :data:`UNDECODABLE` instead.
6. Refusals become statuses with details (:mod:`~gnau_service.server.grpc.statuses`); anything else
   raised is INTERNAL with the request id (logged with its traceback, as structured data); a
   failure after the client went away is nobody's business and ends quietly.
7. Observers (:mod:`~gnau_service.server.grpc.call_observer`: metrics, tracing) hear of every
   call as it starts, before any step above, and of the code and refusal reason it ended with.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
import structlog

from gnau_service.edge.grpc_port import REQUEST_SECONDS
from gnau_service.edge.peers import PeerRates, PeerWarnings, peer_address
from gnau_service.edge.shutdown import Shutdown
from gnau_service.rounds.limits import MAX_REQUEST_ID_HEADER_CHARS
from gnau_service.rounds.refusals import DealerError
from gnau_service.rules.errors import RulesError
from gnau_service.server.grpc.auth import (
    EVERY_OPERATOR_METHODS,
    PUBLIC_CALLER,
    Caller,
    Credentials,
    Role,
    allowed,
)
from gnau_service.server.grpc.call_observer import CallName, CallObserver, RpcType
from gnau_service.server.grpc.shares import Shares
from gnau_service.server.grpc.statuses import (
    EdgeRefusal,
    OperatorScope,
    OverShare,
    PermissionDenied,
    RequestTooSlow,
    ShuttingDown,
    Unauthenticated,
    Undecodable,
    internal_error,
    reason_of,
    status_of,
)
from gnau_service.server.grpc.streams import StreamSlots
from gnau_service.store import LogStalled, StoreUnavailable
from gnau_service.store.errors import ScrubIncomplete

REQUEST_ID_HEADER: Final = "x-request-id"
HEALTH_PREFIX: Final = "/grpc.health.v1."
#: Calls refused for their credentials, per peer: beyond this rate (in bursts of up to
#: REFUSAL_BURST), each refusal is sent SLOW_REFUSAL_SECONDS late.
REFUSALS_PER_SECOND: Final = 10.0
REFUSAL_BURST: Final = 100
SLOW_REFUSAL_SECONDS: Final = 2.0
#: At most one warning about undecodable requests, and one about calls refused for their
#: credentials, per peer per this many seconds.
UNDECODABLE_WARNING_SECONDS: Final = 60.0

#: The caller's role, for the servicers' finer checks (public GetRound).
current_role: contextvars.ContextVar[Role] = contextvars.ContextVar(
    "current_role", default=Role.PUBLIC
)
#: Who the caller is, as the log names the actor of what its call changes
#: (:mod:`gnau_service.audit.actors`): ``token:NAME`` or ``cert:CN``; empty for the public, whose
#: calls change nothing.
current_actor: contextvars.ContextVar[str] = contextvars.ContextVar("current_actor", default="")
#: The operator the caller belongs to (:mod:`gnau_service.audit.operators`): the one operator
#: whose tables, rounds and players it may reach, or None for an auditor of every operator and
#: for the public (who reach only what is public).
current_operator: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_operator", default=None
)

log = structlog.get_logger("gnau.rpc")

Context = grpc.aio.ServicerContext[Any, Any]
Refusal = DealerError | RulesError | StoreUnavailable | EdgeRefusal
_REFUSALS: Final = (DealerError, RulesError, StoreUnavailable, EdgeRefusal)


class _Undecodable:
    """What a request that failed to decode becomes (see the module's step 2)."""

    def __repr__(self) -> str:
        return "UNDECODABLE"


UNDECODABLE: Final = _Undecodable()


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer``, but answering :data:`UNDECODABLE` where it would raise."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception:  # any failure to decode is the client's, and named as such
            return UNDECODABLE

    return deserialize


class CallInterceptor(grpc.aio.ServerInterceptor):
    def __init__(
        self,
        credentials: Credentials,
        calls: Shares,
        streams: StreamSlots,
        shutdown: Shutdown,
    ) -> None:
        self.credentials = credentials
        self._calls = calls
        self._streams = streams
        self._shutdown = shutdown
        #: What a call that could not use the store sets off; the start sets it.
        self.on_storage_failure: Callable[[StoreUnavailable], None] = lambda error: None
        #: Who sees each call begin and end (tracing, metrics); the start sets them.
        self.observers: tuple[CallObserver, ...] = ()
        self.undecodable = PeerWarnings(UNDECODABLE_WARNING_SECONDS)
        self.refused_credentials = PeerWarnings(UNDECODABLE_WARNING_SECONDS)
        self.refusal_rates = PeerRates(REFUSALS_PER_SECOND, REFUSAL_BURST)
        # Each method's wrapped handler, made on its first call rather than on every call.
        self._wrapped: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is None:
            handler = await continuation(handler_call_details)
            if handler is None:
                return None
            wrapped = self._wrapped[method] = self._wrap(method, handler)
        return wrapped

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """The method's handler, served in its request-streaming shape (the wire is the same):
        grpc then starts it as the call's headers arrive, so that the checks come before the
        request is read, and a refused call never waits for its body."""
        serializers = {
            "request_deserializer": tolerant(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }
        call = CallName.of(method, RpcType.of(handler))
        if handler.unary_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary_response(call, handler.unary_unary, one_request=True), **serializers
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary_response(call, handler.stream_unary, one_request=False),
                **serializers,
            )
        if handler.unary_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._streamed_response(call, handler.unary_stream, one_request=True),
                **serializers,
            )
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(
            self._streamed_response(call, handler.stream_stream, one_request=False),
            **serializers,
        )

    def _unary_response(self, call: CallName, behaviour: Any, *, one_request: bool) -> Any:
        async def wrapped(requests: AsyncIterator[Any], context: Context) -> Any:
            async def body(request: Any) -> Any:
                with self._shutdown.call():
                    return await behaviour(request, context)

            return await self._observed(
                call, _Requests(requests, one_request), context, body, streaming=False
            )

        return wrapped

    def _streamed_response(self, call: CallName, behaviour: Any, *, one_request: bool) -> Any:
        async def wrapped(requests: AsyncIterator[Any], context: Context) -> None:
            async def body(request: Any) -> None:
                responses = behaviour(request, context)
                if hasattr(responses, "__aiter__"):  # an async generator
                    async for response in responses:
                        await context.write(response)
                else:  # a coroutine that writes with context.write itself
                    await responses

            await self._observed(
                call, _Requests(requests, one_request), context, body, streaming=True
            )

        return wrapped

    async def _request(self, requests: _Requests, context: Context, method: str) -> Any:
        """The request the method takes: its one message, read within
        :data:`~gnau_service.edge.grpc_port.REQUEST_SECONDS`, or its messages as they come;
        an undecodable (or missing) message refuses the call."""
        if not requests.one:
            return self._checked_requests(requests.stream, context, method)
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                request = await anext(aiter(requests.stream), UNDECODABLE)
        except TimeoutError:
            raise RequestTooSlow(REQUEST_SECONDS) from None
        if request is UNDECODABLE:
            self._warn_undecodable(context, method)
            raise Undecodable()
        return request

    def _checked_requests(
        self, requests: AsyncIterator[Any], context: Context, method: str
    ) -> AsyncIterator[Any]:
        """A request stream whose undecodable message refuses the call."""

        async def checked() -> AsyncIterator[Any]:
            async for message in requests:
                if message is UNDECODABLE:
                    self._warn_undecodable(context, method)
                    raise Undecodable()
                yield message

        return checked()

    async def _observed(
        self,
        call: CallName,
        requests: _Requests,
        context: Context,
        body: Callable[[Any], Awaitable[Any]],
        *,
        streaming: bool,
    ) -> Any:
        """:meth:`_handle`, with the observers told how the call started and ended."""
        if not self.observers:
            return await self._handle(call.full, requests, context, body, streaming=streaming)
        watches = [observer.start(call, context) for observer in self.observers]
        outcome = _Outcome()
        try:
            return await self._handle(
                call.full, requests, context, body, streaming=streaming, outcome=outcome
            )
        except asyncio.CancelledError:
            outcome.code, outcome.reason = grpc.StatusCode.CANCELLED, ""
            raise
        except grpc.aio.AbortError:
            if outcome.code is grpc.StatusCode.OK:  # aborted by the servicer itself
                outcome.code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        finally:
            for watch in reversed(watches):
                watch.end(outcome.code, outcome.reason)

    async def _handle(
        self,
        method: str,
        requests: _Requests,
        context: Context,
        body: Callable[[Any], Awaitable[Any]],
        *,
        streaming: bool,
        outcome: _Outcome | None = None,
    ) -> Any:
        request_id = _bind_request_id(method, context)
        started = time.perf_counter()
        try:
            health = method.startswith(HEALTH_PREFIX)
            if self._shutdown.begun and not health:
                raise ShuttingDown()
            caller = self._caller(method, context)
            current_role.set(caller.role)
            current_actor.set(caller.actor)
            current_operator.set(caller.operator)
            share = caller.actor or f"address {peer_address(context.peer())}"
            with self._calls.held(share, counted_in_total=not health):
                request = await self._request(requests, context, method)
                if streaming:
                    with self._streams.held(share):
                        response = await self._streams.run(lambda: body(request))
                else:
                    response = await body(request)
        except _REFUSALS as error:
            await self._refuse(context, started, error, outcome)
        except grpc.aio.AbortError:
            raise  # the servicer aborted with a status of its own (health's NOT_FOUND)
        except Exception as error:
            if context.cancelled():
                # The client went away while we answered (a write racing its cancel).
                log.info("rpc cancelled by the client", ms=_ms(started))
                if outcome is not None:
                    outcome.code = grpc.StatusCode.CANCELLED
                return None
            log.error("rpc failed", code="INTERNAL", error=type(error).__name__, exc_info=error)
            status = internal_error(request_id)
            if outcome is not None:
                outcome.code, outcome.reason = status.code, reason_of(status)
            await _abort(context, status)
        log.info("rpc", code="OK", ms=_ms(started))
        return response

    async def _refuse(
        self, context: Context, started: float, error: Refusal, outcome: _Outcome | None
    ) -> None:
        status = status_of(error)
        if outcome is not None:
            outcome.code, outcome.reason = status.code, reason_of(status)
        if isinstance(error, Unauthenticated | PermissionDenied):
            self._warn_refused_credentials(context, status)
            if self.refusal_rates.over(peer_address(context.peer())):
                # A peer refused faster than any honest client is: its refusals wait, so that
                # its calls at once, not its speed, bound what it costs.
                await asyncio.sleep(SLOW_REFUSAL_SECONDS)
        elif not isinstance(error, Undecodable | OverShare):  # each counted in a warning instead
            log.info("rpc refused", code=status.code.name, reason=status.details, ms=_ms(started))
        # A stalled log is the store's to report (StorageHealth watches it), not an outage; nor
        # is a forget whose scrub a long read held up (the store works).
        if isinstance(error, StoreUnavailable) and not isinstance(
            error, LogStalled | ScrubIncomplete
        ):
            self.on_storage_failure(error)
        await _abort(context, status)

    def _caller(self, method: str, context: Context) -> Caller:
        """The caller, its role checked against the method."""
        metadata = dict(context.invocation_metadata() or ())
        caller = self._authenticate(str(metadata.get("authorization", "")), context)
        if not allowed(method, caller.role):
            raise PermissionDenied(str(caller.role), method)
        if method in EVERY_OPERATOR_METHODS and caller.operator is not None:
            raise OperatorScope(
                f"{method} reads every operator's entries: only an auditor of every operator may"
                f" call it, not a credential of operator {caller.operator}",
                caller.operator,
            )
        return caller

    def _authenticate(self, header: str, context: Context) -> Caller:
        if header:
            scheme, _, token = header.partition(" ")
            found = (
                self.credentials.identify_token(token.strip())
                if scheme.lower() == "bearer"
                else None
            )
            if found is None:
                raise Unauthenticated()
            return found
        for name in context.auth_context().get("x509_common_name", []):
            caller = self.credentials.identify_common_name(name.decode("utf-8", "replace"))
            if caller is not None:
                return caller
        return PUBLIC_CALLER

    def _warn_refused_credentials(self, context: Context, status: grpc.Status) -> None:
        """A stranger's calls (or a client's wrong token) cost no log line each."""
        _warn_peer(
            self.refused_credentials,
            context,
            "calls refused for their credentials",
            code=status.code.name,
            reason=status.details,
        )

    def _warn_undecodable(self, context: Context, method: str) -> None:
        _warn_peer(self.undecodable, context, "undecodable requests", method=method)


def _warn_peer(warnings: PeerWarnings, context: Context, event: str, **fields: str) -> None:
    """At most one WARNING per peer a minute, with the count of calls it stands for."""
    peer = peer_address(context.peer())
    count = warnings.due(peer)
    if count is not None:
        log.warning(
            event,
            peer=peer,
            **fields,
            count=count,
            total=warnings.total,
            per_seconds=UNDECODABLE_WARNING_SECONDS,
        )


@dataclass(frozen=True)
class _Requests:
    """A call's request messages as grpc hands them over, and whether its method takes one."""

    stream: AsyncIterator[Any]
    one: bool


@dataclass
class _Outcome:
    """How a call ended, for its observers: its status code and a refusal's reason. Not frozen:
    the call fills it in as it ends, and its observers read it then."""

    code: grpc.StatusCode = grpc.StatusCode.OK
    reason: str = ""


async def _abort(context: Context, status: grpc.Status) -> None:
    """End the call with ``status`` (raises grpc's AbortError, as ``abort_with_status`` does).

    A status cannot be sent while a write is still pending: a stream whose client stopped
    reading, ended at shutdown. Such a call ends as cancelled, which grpc does without a word;
    the transport closes it when the server stops.
    """
    try:
        await context.abort_with_status(status)
    except grpc.aio.AbortError:
        raise
    except Exception:
        log.info("rpc ended without its status: the client is not reading", code=status.code.name)
        raise asyncio.CancelledError from None


def _bind_request_id(method: str, context: Context) -> str:
    """The call's request id (the client's, if usable), bound to its log lines and trailers."""
    given = ""
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_HEADER:
            given = str(value)
    usable = (
        0 < len(given) <= MAX_REQUEST_ID_HEADER_CHARS and given.isascii() and given.isprintable()
    )
    request_id = given if usable else str(uuid.uuid4())
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id=request_id, method=method)
    context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
    return request_id


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
