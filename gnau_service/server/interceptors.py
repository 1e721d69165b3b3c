"""One interceptor for every call: request id, authorisation, error mapping, one log line.

Values set in ``intercept_service`` itself do not reach the handler (grpc/grpc#33071), so all of
it happens *inside* the wrapped handler, where contextvars (structlog's included) propagate.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import structlog

from gnau_service.rules.errors import RulesError
from gnau_service.server.auth import Credentials, Role, allowed
from gnau_service.server.errors import status_of
from gnau_service.server.rounds import DealerError

REQUEST_ID_HEADER = "x-request-id"

#: The caller's role, for the servicers' finer checks (public GetRound).
current_role: contextvars.ContextVar[Role] = contextvars.ContextVar(
    "current_role", default=Role.PUBLIC
)

log = structlog.get_logger("gnau.rpc")


class CallInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
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
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _unary(self, method: str, behaviour: Any) -> Any:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            started = await self._begin(method, context)
            try:
                response = await behaviour(request, context)
            except (DealerError, RulesError) as error:
                self._end(method, context, started, error=error)
                await context.abort_with_status(status_of(error))
            except Exception as error:
                await self._internal(method, context, started, error)
            self._end(method, context, started)
            return response

        return wrapped

    def _stream(self, method: str, behaviour: Any) -> Any:
        async def wrapped(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            started = await self._begin(method, context)
            try:
                async for response in behaviour(request, context):
                    yield response
            except (DealerError, RulesError) as error:
                self._end(method, context, started, error=error)
                await context.abort_with_status(status_of(error))
            except Exception as error:
                await self._internal(method, context, started, error)
            self._end(method, context, started)

        return wrapped

    async def _begin(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> float:
        metadata = dict(context.invocation_metadata() or ())
        request_id = str(metadata.get(REQUEST_ID_HEADER) or uuid.uuid4())
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id, method=method)
        context.set_trailing_metadata(((REQUEST_ID_HEADER, request_id),))
        role = await self._authenticate(metadata, context)
        current_role.set(role)
        if not allowed(method, role):
            log.info("rpc refused", role=str(role), code="PERMISSION_DENIED")
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"the {role} role may not call {method}"
            )
        return time.perf_counter()

    async def _authenticate(
        self, metadata: dict[str, Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> Role:
        header = str(metadata.get("authorization", ""))
        if header:
            scheme, _, token = header.partition(" ")
            role = (
                self._credentials.role_of_token(token.strip())
                if scheme.lower() == "bearer"
                else None
            )
            if role is None:
                log.info("rpc refused", code="UNAUTHENTICATED")
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "the authorization header must be 'Bearer <token>' with a known token",
                )
            assert role is not None
            return role
        names = context.auth_context().get("x509_common_name", [])
        for name in names:
            role = self._credentials.mtls_names.get(name.decode())
            if role is not None:
                return role
        return Role.PUBLIC

    @staticmethod
    def _end(
        method: str,
        context: grpc.aio.ServicerContext[Any, Any],
        started: float,
        *,
        error: DealerError | RulesError | None = None,
    ) -> None:
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        if error is None:
            log.info("rpc", code="OK", ms=elapsed_ms)
        else:
            code = status_of(error).code
            log.info("rpc refused", code=code.name, reason=str(error), ms=elapsed_ms)

    @staticmethod
    async def _internal(
        method: str,
        context: grpc.aio.ServicerContext[Any, Any],
        started: float,
        error: Exception,
    ) -> None:
        if isinstance(error, grpc.aio.AbortError) or context.done():
            raise error
        log.exception("rpc failed", code="INTERNAL")
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        await context.abort(
            grpc.StatusCode.INTERNAL, f"internal error; quote request id {request_id}"
        )
