"""OpenTelemetry tracing: a server span per call, and the trace in every log line of the call.

Imported only when ``--tracing`` is ``console`` or ``otlp`` (it needs the ``[tracing]`` extra),
so tracing that is off costs nothing, not even the import. The span is made by the call
interceptor's observer hook (:mod:`~gnau_service.server.grpc.call_observer`), the one place every
call passes, so refusals at the edge (authentication, undecodable requests, stream limits,
shutdown) have spans with their real status codes, and so do streams and health checks.

- The caller's trace continues if its call carries W3C ``traceparent`` metadata (what
  OpenTelemetry's gRPC client instrumentation sends); otherwise the span starts a trace.
- Spans follow OpenTelemetry's RPC conventions: named ``package.Service/Method``, kind SERVER,
  ``rpc.system``, ``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``; a refusal's
  ErrorInfo reason is ``gnau.reason``. A span's status is ERROR only for the codes that mean the
  server failed (INTERNAL, UNAVAILABLE, ...), as the conventions ask; a refused request is the
  client's error, not the server's.
- ``otlp`` exports in batches over gRPC, configured by the standard ``OTEL_EXPORTER_OTLP_*``
  variables (endpoint, headers, certificates); ``console`` prints each span to stdout as JSON.
  ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the service (``gnau-dealer`` by
  default), and ``OTEL_TRACES_SAMPLER`` samples.

No attribute holds request bodies, tokens or seeds: only the method, the status and the reason.

OpenTelemetry's own aio server interceptor (``opentelemetry-instrumentation-grpc``) is not used:
it cannot wrap a streaming response written with ``context.write``, as every stream the call
interceptor wraps is (open-telemetry/opentelemetry-python-contrib#3066: the call fails UNKNOWN);
it does not see a status sent with ``abort_with_status``, as every refusal is, so it would mark
refusals OK; and it names spans with the method's leading ``/``.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from contextvars import Token
from typing import Any, Final

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import SpanKind, Status, StatusCode

from gnau_service import __version__
from gnau_service.server.grpc.call_observer import CallName, CallWatch, Context

#: The gRPC codes that mark a server span as failed (OpenTelemetry's RPC conventions).
SERVER_ERRORS: Final = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


class Tracing:
    """A call observer that makes one server span per call; :meth:`shutdown` sends the rest."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer("gnau_service.server", __version__)

    @classmethod
    def exporting(cls, mode: str) -> Tracing:
        """Spans for ``--tracing`` ``otlp`` or ``console``, sent in batches off the event loop."""
        exporter: SpanExporter
        if mode == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )

            exporter = OTLPSpanExporter()
        elif mode == "console":
            exporter = ConsoleSpanExporter()
        else:
            raise ValueError(f"tracing mode {mode!r} is not otlp or console")
        return cls(_provider(BatchSpanProcessor(exporter)))

    @classmethod
    def to(cls, exporter: SpanExporter) -> Tracing:
        """Spans to ``exporter`` as each ends (a test's in-memory exporter)."""
        return cls(_provider(SimpleSpanProcessor(exporter)))

    def start(self, call: CallName, context: Context) -> CallWatch:
        carrier = {str(key): str(value) for key, value in context.invocation_metadata() or ()}
        parent = propagate.extract(carrier)
        span = self._tracer.start_span(
            call.full.lstrip("/"),
            context=parent,
            kind=SpanKind.SERVER,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": call.service,
                "rpc.method": call.method,
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return _SpanWatch(span, token)

    def shutdown(self) -> None:
        self.provider.shutdown()


def _provider(processor: SpanProcessor) -> TracerProvider:
    """A provider of the service's own (never OpenTelemetry's global one)."""
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: "gnau-dealer", SERVICE_VERSION: __version__})
    )
    provider.add_span_processor(processor)
    return provider


class _SpanWatch:
    """One call's span, current while the call runs (so its log lines carry it)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span, token: Token[otel_context.Context]) -> None:
        self._span = span
        self._token = token

    def end(self, code: grpc.StatusCode, reason: str) -> None:
        span = self._span
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if reason:
            span.set_attribute("gnau.reason", reason)
        if code in SERVER_ERRORS:
            span.set_status(Status(StatusCode.ERROR, code.name))
        span.end()
        otel_context.detach(self._token)


def add_trace_ids(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: the current span's ``trace_id`` and ``span_id`` (hex, as trace
    backends show them), on lines logged inside a span."""
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict["trace_id"] = trace.format_trace_id(span_context.trace_id)
        event_dict["span_id"] = trace.format_span_id(span_context.span_id)
    return event_dict
