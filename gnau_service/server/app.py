"""Wiring: the log key, the tokens, the store, the servicers, health, reflection, TLS, limits,
and a graceful shutdown (health NOT_SERVING first, then the calls in flight finish).

>>> # In tests:  async with running(settings) as app: ... app.port ...
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import grpc
import structlog
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from gnau_service import __version__
from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner, ensure_private_key
from gnau_service.audit.software import software_identity
from gnau_service.server.auth import Credentials, ensure_token_file, load_tokens
from gnau_service.server.config import Settings
from gnau_service.server.interceptors import CallInterceptor
from gnau_service.server.rounds import Dealer
from gnau_service.server.servicers import AuditServicer, DealerServicer
from gnau_service.store import Store, open_store

SERVICE_NAMES: Final = (
    dealer_pb2.DESCRIPTOR.services_by_name["DealerService"].full_name,
    audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name,
)

log = structlog.get_logger("gnau.server")


def configure_logging(log_format: str) -> None:
    """Structured logs on stderr: one JSON object per line (or a console rendering)."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        logger_factory=_StderrLogger,
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


class _StderrLogger:
    """Writes each line to ``sys.stderr`` as it is at that moment (so a redirect, or a test's
    capture, sees every line), one write per line."""

    def __init__(self, *args: object) -> None:
        pass

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


@dataclass
class App:
    """A started service: its gRPC server, port, store and health servicer."""

    server: grpc.aio.Server
    port: int
    store: Store
    health: health.aio.HealthServicer
    settings: Settings
    new_operator_token: str | None = None

    async def stop(self) -> None:
        """Graceful shutdown: NOT_SERVING first, calls in flight get the grace period."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.settings.grace_seconds)
        self.store.close()
        log.info("stopped")


def open_signer(settings: Settings) -> LogSigner:
    """The log key from ``--key``, or the data directory's, generated on first start."""
    if settings.key is None:
        key_file = ensure_private_key(settings.data_dir)
        if key_file.created:
            log.warning("generated a new log signing key", path=str(key_file.path))
        return LogSigner.from_key_file(settings.origin, key_file.path)
    return LogSigner.from_key_file(settings.origin, settings.key)


def open_credentials(settings: Settings) -> tuple[Credentials, str | None]:
    """Known tokens and mTLS names, and the operator token made if this is the first start
    (for the command line to show once: it never goes into the logs)."""
    token = ensure_token_file(settings.tokens_path) if settings.tokens is None else None
    return Credentials(load_tokens(settings.tokens_path), dict(settings.mtls_roles)), token


async def start(settings: Settings) -> App:
    settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    signer = open_signer(settings)
    credentials, new_token = open_credentials(settings)
    store = open_store(settings.database_url, signer)
    try:
        await store.run_async(
            lambda tx: tx.append(
                EntryKind.SERVICE_STARTED,
                {"software": software_identity(), "origin": signer.origin, "key": signer.vkey},
            )
        )
        server = grpc.aio.server(
            interceptors=[CallInterceptor(credentials)],
            maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
            options=_channel_options(settings),
        )
        dealer = Dealer(store, max_stake=settings.max_stake)
        dealer_pb2_grpc.add_DealerServiceServicer_to_server(DealerServicer(dealer), server)
        audit_pb2_grpc.add_AuditServiceServicer_to_server(AuditServicer(store), server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        if settings.reflection:
            reflection.enable_server_reflection(
                (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
            )
        port = _bind(server, settings)
        await server.start()
    except BaseException:
        store.close()
        raise
    log.info(
        "serving",
        listen=settings.listen,
        port=port,
        version=__version__,
        database=_redacted(settings.database_url),
        origin=signer.origin,
        key=signer.vkey,
        tls=settings.tls_cert is not None,
        mtls=settings.tls_client_ca is not None,
        reflection=settings.reflection,
    )
    return App(server, port, store, health_servicer, settings, new_token)


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[App]:
    app = await start(settings)
    try:
        yield app
    finally:
        await app.stop()


async def serve(settings: Settings, on_started: Callable[[App], None] | None = None) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully."""
    app = await start(settings)
    if on_started is not None:
        on_started(app)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    log.info("shutting down", grace_seconds=settings.grace_seconds)
    await app.stop()


def _channel_options(settings: Settings) -> list[tuple[str, int]]:
    keepalive_ms = int(settings.keepalive_seconds * 1000)
    return [
        # A second service on a taken port must fail to start, not share the port's calls.
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _bind(server: grpc.aio.Server, settings: Settings) -> int:
    if settings.tls_cert is None or settings.tls_key is None:
        return server.add_insecure_port(settings.listen)
    root = settings.tls_client_ca.read_bytes() if settings.tls_client_ca else None
    credentials = grpc.ssl_server_credentials(
        [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())],
        root_certificates=root,
        require_client_auth=root is not None,
    )
    return server.add_secure_port(settings.listen, credentials)


def _redacted(url: str) -> str:
    """A database URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    return f"{scheme}{sep}{credentials.split(':')[0]}:***@{host}"
