"""Tracing over a real server: a span per call (refusals included), the caller's trace
continued, the span's ids in the call's log lines, and nothing of OpenTelemetry when off."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from gnau.v1 import dealer_pb2, dealer_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gnau_service.server.grpc.tracing import Tracing
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from tests.catalogued import catalogue
from tests.server.conftest import TOKENS, write_tokens
from tests.server.test_interceptors import log_lines
from tests.server.test_service import refusal

REPO = Path(__file__).resolve().parents[2]
SHUFFLE = "gnau.v1.DealerService/Shuffle"


@pytest.fixture
async def traced(tmp_path: Path) -> AsyncIterator[tuple[InMemorySpanExporter, int]]:
    configure_logging("json", trace_ids=True)
    exporter = InMemorySpanExporter()
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    try:
        async with running(settings, tracing=Tracing.to(exporter)) as app:
            await catalogue(app.store, ["traced"])  # the table its Shuffle deals at (issue 38)
            yield exporter, app.port
    finally:
        configure_logging("json")


def server_spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [
        span
        for span in exporter.get_finished_spans()
        if span.name == name and span.kind is trace.SpanKind.SERVER
    ]


async def test_each_call_has_a_span_that_its_log_lines_name(
    traced: tuple[InMemorySpanExporter, int], capsys: pytest.CaptureFixture[str]
) -> None:
    exporter, port = traced
    # The client's own spans, from OpenTelemetry's gRPC client instrumentation.
    client_spans = InMemorySpanExporter()
    client_provider = TracerProvider()
    client_provider.add_span_processor(SimpleSpanProcessor(client_spans))
    capsys.readouterr()
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", interceptors=aio_client_interceptors(tracer_provider=client_provider)
    ) as channel:
        dealer = dealer_pb2_grpc.DealerServiceStub(channel)
        request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="traced")
        await dealer.Shuffle(request, metadata=(("authorization", f"Bearer {TOKENS['operator']}"),))
        refused = dealer.Shuffle(request, metadata=(("authorization", "Bearer not-a-token"),))
        assert (await refusal(refused)).code() == grpc.StatusCode.UNAUTHENTICATED
    lines = [line for line in log_lines(capsys.readouterr().err) if line.get("method")]

    spans = server_spans(exporter, SHUFFLE)
    assert len(spans) == 2, "one server span per call, the refused one too"
    answered, rejected = spans
    assert answered.attributes is not None and rejected.attributes is not None
    assert answered.attributes["rpc.grpc.status_code"] == grpc.StatusCode.OK.value[0]
    assert answered.attributes["rpc.service"] == "gnau.v1.DealerService"
    assert answered.attributes["rpc.method"] == "Shuffle"
    assert rejected.attributes["rpc.grpc.status_code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
    assert rejected.attributes["gnau.reason"] == "UNAUTHENTICATED"
    # A refused request is the client's error, not the server's: the span is not failed.
    assert rejected.status.status_code is trace.StatusCode.UNSET

    # The caller's trace continues on the server: same trace, the client span as parent.
    callers = [span for span in client_spans.get_finished_spans() if span.name == f"/{SHUFFLE}"]
    assert len(callers) == 2
    for caller, span in zip(callers, spans, strict=True):
        assert span.context is not None and caller.context is not None
        assert span.context.trace_id == caller.context.trace_id
        assert span.parent is not None and span.parent.span_id == caller.context.span_id

    # Each call's log line carries its span's ids: the refused one's is the first warning about
    # its peer's refused credentials (later refusals within the minute are only counted).
    assert [line["event"] for line in lines] == ["rpc", "calls refused for their credentials"]
    for line, span in zip(lines, spans, strict=True):
        assert span.context is not None
        assert line["trace_id"] == f"{span.context.trace_id:032x}"
        assert line["span_id"] == f"{span.context.span_id:016x}"


async def test_a_stream_written_with_context_write_is_traced(
    traced: tuple[InMemorySpanExporter, int],
) -> None:
    """Health's Watch writes with ``context.write`` (as every stream the call interceptor wraps
    does): it still streams with tracing on, and its span ends when the client cancels."""
    exporter, port = traced
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
    for _ in range(100):  # the server hears of the cancel after the client
        spans = server_spans(exporter, "grpc.health.v1.Health/Watch")
        if spans:
            break
        await asyncio.sleep(0.05)
    (span,) = spans
    assert span.attributes is not None
    assert span.attributes["rpc.service"] == "grpc.health.v1.Health"
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.CANCELLED.value[0]


def test_tracing_off_never_imports_opentelemetry(tmp_path: Path) -> None:
    """A server with every other part on (HTTP port, metrics) and tracing off."""
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from pathlib import Path
        from gnau_service.server.process.app import running
        from gnau_service.server.process.structured_logs import configure_logging
        from gnau_service.server.process.config import load_settings

        async def main():
            configure_logging("json")
            settings = load_settings(None, {{}}, {{
                "listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0",
                "data_dir": {str(tmp_path / "data")!r}, "shutdown_notice_seconds": 0,
            }})
            async with running(settings) as app:
                assert app.tracing is None and app.metrics is not None
            print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_tracing_without_opentelemetry_installed_is_a_one_line_error(tmp_path: Path) -> None:
    # OpenTelemetry made unimportable, as on an install without the [tracing] extra.
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from gnau_service.cli.main import main\n"
        f"sys.argv = ['gnau', 'serve', '--listen', '127.0.0.1:0', '--tracing', 'otlp',"
        f" '--data-dir', {str(tmp_path / 'data')!r}]\n"
        "sys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert lines[-1]["event"] == "cannot start"
    assert "pip install 'gnau-service[tracing]'" in lines[-1]["error"]
    assert not (tmp_path / "data").exists(), "nothing is created by a service that cannot start"
