"""What the call interceptor tells its observers (metrics, tracing): each call's name when it
starts, and its status code and refusal reason when it ends.

The interceptor (:mod:`~gnau_service.server.grpc.interceptors`) is the one place every call passes,
refusals included, so observers hook in there rather than wrapping the handlers a second time.
With no observer (no metrics port, tracing off) a call costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import grpc

Context = grpc.aio.ServicerContext[Any, Any]


class RpcType(StrEnum):
    """A method's shape, spelt as go-grpc-prometheus's ``grpc_type`` label."""

    UNARY = "unary"
    CLIENT_STREAM = "client_stream"
    SERVER_STREAM = "server_stream"
    BIDI_STREAM = "bidi_stream"

    @classmethod
    def of(cls, handler: grpc.RpcMethodHandler[Any, Any]) -> RpcType:
        if handler.request_streaming:
            return cls.BIDI_STREAM if handler.response_streaming else cls.CLIENT_STREAM
        return cls.SERVER_STREAM if handler.response_streaming else cls.UNARY


@dataclass(frozen=True)
class CallName:
    """A registered method: ``/package.Service/Method`` split, and its shape.

    >>> CallName.of("/gnau.v1.DealerService/Shuffle", RpcType.UNARY)
    CallName(full='/gnau.v1.DealerService/Shuffle', service='gnau.v1.DealerService', method='Shuffle', kind=<RpcType.UNARY: 'unary'>)
    """  # noqa: E501

    full: str
    service: str
    method: str
    kind: RpcType

    @classmethod
    def of(cls, full: str, kind: RpcType) -> CallName:
        service, _, method = full.lstrip("/").rpartition("/")
        return cls(full, service, method, kind)


class CallWatch(Protocol):
    def end(self, code: grpc.StatusCode, reason: str) -> None:
        """The call ended with ``code``; ``reason`` is a refusal's ErrorInfo reason, or ""."""


class CallObserver(Protocol):
    def start(self, call: CallName, context: Context) -> CallWatch:
        """A call of ``call`` starts (before any check); the watch hears how it ended."""
