"""Wiring: the ports, the log key, the tokens, the store, the servicers, health, reflection, TLS,
limits, and a graceful shutdown (:mod:`~gnau_service.edge.shutdown`).

The ports (gRPC, and HTTP if ``--http-listen`` is set, and metrics if ``--metrics-listen`` is)
are bound first: a service that cannot serve creates no key, token file or database. Metrics
(:mod:`~gnau_service.server.process.metrics`) are kept only where a port serves them; tracing
(:mod:`~gnau_service.server.grpc.tracing`) is imported only when ``--tracing`` asks for it. Each
part the start makes puts how it stops on one stack, so a start that fails half-way and a
graceful stop undo the same parts, the last made first. The log lines are set up apart
(:mod:`~gnau_service.server.process.structured_logs`).

>>> # In tests:  async with running(settings) as app: ... app.port ...
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from time import monotonic
from typing import TYPE_CHECKING, Final

import grpc
import structlog
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from gnau_service import __version__
from gnau_service.audit.actors import SERVICE
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.software import software_identity
from gnau_service.audit.software_manifest import Installation
from gnau_service.edge.addresses import split_host_port
from gnau_service.edge.grpc_port import grpc_connection_cap, grpc_port_options
from gnau_service.edge.http import connection_cap, descriptor_limit
from gnau_service.edge.shutdown import STREAMS_END_SECONDS, Shutdown, exit_within
from gnau_service.rounds.catalogue import Catalogue
from gnau_service.rounds.completion import RoundCompletion
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.limits import MAX_GRPC_REQUEST_BYTES
from gnau_service.rounds.planning import PlanCounts
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.server.grpc.auth import Credentials
from gnau_service.server.grpc.call_observer import CallObserver
from gnau_service.server.grpc.core_logs import lower_peer_gone
from gnau_service.server.grpc.interceptors import CallInterceptor
from gnau_service.server.grpc.servicers import AuditServicer, DealerServicer
from gnau_service.server.grpc.shares import Shares
from gnau_service.server.grpc.streams import StreamSlots
from gnau_service.server.http.routes import Scrapeable, WebServer, metrics_application
from gnau_service.server.process import gc_tuning
from gnau_service.server.process.config import Settings, cannot_listen
from gnau_service.server.process.first_start import (
    credentials_of,
    open_credentials,
    open_service_store,
    open_signer,
)
from gnau_service.server.process.metrics import Metrics
from gnau_service.server.process.request_retention import RequestRetention
from gnau_service.server.process.software_checks import DAILY_SECONDS, SoftwareChecks
from gnau_service.server.process.store_health import StorageHealth
from gnau_service.server.process.token_reload import TokenReload
from gnau_service.server.process.witness_endpoints import WitnessEndpoint
from gnau_service.server.process.witnessing import Witnessing
from gnau_service.server.process.worker_metrics import WorkerCollector, WorkerMetrics
from gnau_service.server.process.workers import WorkerRole
from gnau_service.store import (
    LogTail,
    Store,
    StoreError,
    StoreUnavailable,
    redacted_url,
)
from gnau_service.store.cosignatures import NO_WITNESSES, WitnessQuorum

if TYPE_CHECKING:
    from gnau_service.server.grpc.tracing import Tracing

DEALER_SERVICE: Final = dealer_pb2.DESCRIPTOR.services_by_name["DealerService"].full_name
AUDIT_SERVICE: Final = audit_pb2.DESCRIPTOR.services_by_name["AuditService"].full_name
SERVICE_NAMES: Final = (DEALER_SERVICE, AUDIT_SERVICE)
#: The longest a clean stop waits for its SERVICE_STOPPED entry (docs/api.md, *Shutdown*).
STOP_ENTRY_SECONDS: Final = 2.0

log = structlog.get_logger("gnau.server")


@dataclass
class App:
    """A started service: its gRPC server, port, store, and the parts that stop it."""

    server: grpc.aio.Server
    port: int
    store: Store
    tail: LogTail
    health: health.aio.HealthServicer
    streams: StreamSlots
    shutdown: Shutdown
    storage: StorageHealth
    interceptor: CallInterceptor
    settings: Settings
    tokens: TokenReload  # rereads the token file on SIGHUP and when it changes
    #: How each part the start made stops, the last made first (see :func:`start`).
    parts: AsyncExitStack = field(repr=False)
    new_operator_token: str | None = None
    web: WebServer | None = None  # the HTTP port, when --http-listen is set
    metrics: Metrics | None = None  # when a port serves them (--http-listen, --metrics-listen)
    metrics_web: WebServer | None = None  # the metrics-only port, when --metrics-listen is set
    tracing: Tracing | None = None  # when --tracing is not off
    witnessing: Witnessing | None = None  # asks the witnesses to cosign, when --witness is set
    software: SoftwareChecks | None = None  # checks the software, when --software-manifest is set

    @property
    def http_port(self) -> int | None:
        return None if self.web is None else self.web.port

    @property
    def metrics_port(self) -> int | None:
        return None if self.metrics_web is None else self.metrics_web.port

    async def stop(self) -> None:
        """Graceful shutdown, in the order of :mod:`~gnau_service.edge.shutdown`: once the
        calls in flight have finished (or the grace period is over), every part the start made
        stops, in the reverse of the order it was made in."""
        grace, notice = self.settings.grace_seconds, self.settings.shutdown_notice_seconds
        await self.health.enter_graceful_shutdown()
        self.shutdown.begin()
        await asyncio.sleep(min(notice, STREAMS_END_SECONDS))
        self.streams.end_all()
        await self.shutdown.calls_finished(self.shutdown.left(grace))
        await asyncio.sleep(self.shutdown.left(notice))
        await self.parts.aclose()
        log.info("stopped")


async def start(
    settings: Settings,
    *,
    tracing: Tracing | None = None,
    role: WorkerRole | None = None,
    installation: Callable[[], Installation] = Installation.running,
    software_check_seconds: float = DAILY_SECONDS,
) -> App:
    """Start the service. Tracing is made from ``settings.tracing`` unless given (a test's
    in-memory exporter); the software checks (``--software-manifest``) read ``installation``
    every ``software_check_seconds`` (a test's copy of the package, a shorter day). A worker of
    ``--workers`` (``role``) shares its ports with the other workers, and its ``/metrics``
    answers for all of them (:mod:`~gnau_service.server.process.worker_metrics`).

    Each part is made, then how it stops goes on one stack: if a later part fails to start,
    the stack stops the parts already made, and :meth:`App.stop` stops them all, the last made
    first. So the transport stops first, then the background tasks, then the log's tail, then
    the store, then tracing (which sends the spans still held)."""
    lower_peer_gone()
    calls = Shares("calls", settings.max_concurrent_rpcs, settings.max_calls_per_caller)
    streams = StreamSlots(settings.max_streams, settings.max_streams_per_caller)
    shutdown = Shutdown()
    interceptor = CallInterceptor(Credentials({}, {}), calls, streams, shutdown)
    # One descriptor budget for every port: each HTTP port an equal share, the gRPC port what
    # they leave (edge/http.py, edge/grpc_port.py).
    descriptors = descriptor_limit()
    http_ports = sum(1 for listen in (settings.http_listen, settings.metrics_listen) if listen)
    http_connections = connection_cap(descriptors, http_ports)
    grpc_connections = grpc_connection_cap(
        descriptors, http_ports=http_ports, http_connections=http_connections
    )
    server = grpc.aio.server(
        # Calls are counted by the interceptor's shares (server/grpc/shares.py), which keep a
        # place for health checks; grpc's own count would refuse those too.
        interceptors=[interceptor],
        options=_channel_options(settings, grpc_connections, reuse_port=role is not None),
    )
    port = _bind(server, settings)  # before anything is created: a busy port creates nothing
    async with AsyncExitStack() as parts:
        parts.push_async_callback(server.stop, None)
        web: WebServer | None = None
        metrics_web: WebServer | None = None
        if settings.http_listen:
            web = WebServer.bind(settings.http_listen, reuse_port=role is not None)
            parts.callback(web.close)
        if settings.metrics_listen:
            metrics_web = WebServer.bind(
                settings.metrics_listen, "--metrics-listen", reuse_port=role is not None
            )
            parts.callback(metrics_web.close)
        if tracing is None and settings.tracing != "off":
            tracing = _tracing(settings.tracing)
        if tracing is not None:
            parts.push_async_callback(asyncio.to_thread, tracing.shutdown)  # sends spans held
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        signer = open_signer(settings)
        token_file, new_token, tokens_version = open_credentials(settings)
        interceptor.credentials = credentials_of(token_file, settings)
        store = await open_service_store(settings, signer)
        parts.callback(store.close)
        tail = LogTail(store)
        parts.push_async_callback(tail.stop)
        endpoints = [WitnessEndpoint.parse(spec) for spec in settings.witnesses]
        quorum = (
            WitnessQuorum(tuple(e.key.vkey for e in endpoints), settings.witness_quorum)
            if endpoints
            else NO_WITNESSES
        )
        witnessing = (
            Witnessing(
                store,
                tail,
                endpoints,
                interval_seconds=settings.witness_interval_ms / 1000,
                clock_bound_seconds=settings.witness_clock_bound_seconds,
            )
            if endpoints
            else None
        )
        if witnessing is not None:
            parts.push_async_callback(witnessing.stop)
        health_servicer = health.aio.HealthServicer()
        storage = StorageHealth(store, lambda serving: _set_dealing(health_servicer, serving))
        metrics: Metrics | None = None
        plans = PlanCounts()
        software = (
            SoftwareChecks(
                store,
                settings.software_manifest,
                settings.release_key,
                installation=installation,
                interval_seconds=software_check_seconds,
            )
            if settings.software_manifest is not None and settings.release_key is not None
            else None
        )
        if web is not None or metrics_web is not None:
            metrics = Metrics(
                store,
                streams_open=lambda: streams.open,
                streams_limit=streams.total,
                storage_failing=lambda: storage.failing,
                serving=lambda: storage.serving and not shutdown.begun,
                witnesses=() if witnessing is None else witnessing.statuses,
                log_size=lambda: tail.size,
                log_stalled=lambda: storage.stalled,
                credentials=lambda: interceptor.credentials,
                plans=plans,
                software_mismatch=lambda: software is not None and software.alarming,
            )
            store.observe(metrics.batch_committed)
        observers: list[CallObserver] = [
            observer for observer in (tracing, metrics) if observer is not None
        ]
        interceptor.observers = tuple(observers)
        interceptor.on_storage_failure = _on_storage_failure(storage, metrics)
        started: dict[str, JsonValue] = {
            "actor": SERVICE,
            "software": software_identity(),
            "origin": signer.origin,
            "key": signer.vkey,
        }
        # Game settings change only by a restart, so each start records the ones in force, in
        # the same step: the log reads them right after the start they belong to.
        configured: dict[str, JsonValue] = {"actor": SERVICE, "settings": settings.game_settings()}
        await store.run_async(
            lambda tx: [
                tx.append(EntryKind.SERVICE_STARTED, started),
                tx.append(EntryKind.CONFIG_CHANGED, configured),
            ]
        )
        # Tables catalogued by a migration, from the rounds already played, get their entries.
        catalogue = Catalogue(store)
        await catalogue.log_migrated(actor=SERVICE)
        starters = await catalogue.open_starter_tables(actor=SERVICE)
        if starters:
            log.info(
                "starter tables catalogued",
                first=starters[0].table_id,
                last=starters[-1].table_id,
                operator=starters[0].operator,
                hint="the catalogue was empty; see them with `gnau table list`, change them with "
                "`gnau table set`",
            )
        await tail.start()
        dealer = Dealer(
            store, max_stake=settings.max_stake, deadlines=settings.deadlines, plans=plans
        )
        completion = RoundCompletion(dealer)
        # Reads the shipped table of every rule set's figures now: a damaged install fails to
        # start rather than refusing its first Shuffle.
        ReturnToPlayer.of_rules(HouseRules())
        dealer_pb2_grpc.add_DealerServiceServicer_to_server(
            DealerServicer(
                dealer,
                quorum,
                public_round_listing=settings.public_round_listing,
            ),
            server,
        )
        audit_pb2_grpc.add_AuditServiceServicer_to_server(
            AuditServicer(store, tail, quorum, None if software is None else software.check),
            server,
        )
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        for name in ("", *SERVICE_NAMES):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        storage.watch_stalls()
        if settings.reflection:
            reflection.enable_server_reflection(
                (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
            )

        async def record_tokens_changed(changes: dict[str, JsonValue]) -> None:
            await _append_or_warn(store, EntryKind.TOKENS_CHANGED, changes, seconds=None)

        tokens = TokenReload(
            settings.tokens_path,
            dict(settings.mtls_roles),
            lambda credentials: setattr(interceptor, "credentials", credentials),
            read=tokens_version,
            in_force=token_file.records,
            record=record_tokens_changed,
        )
        retention = RequestRetention(store, settings.request_retention_days)
        retention.start()
        # Software authentication before the port opens: its entry follows the start's.
        if software is None:
            log.warning(
                "no software manifest configured",
                hint="the software is not checked against a signed manifest; see "
                "docs/software.md (--software-manifest, --release-key)",
            )
        else:
            await software.check(SERVICE)
            software.start()
            parts.push_async_callback(software.stop)
        # Once the transport has stopped: the storage probe, the token watch, the witnesses.
        parts.push_async_callback(tokens.stop)
        parts.push_async_callback(storage.stop)
        parts.push_async_callback(retention.stop)
        await server.start()
        completion.start()

        async def record_stop() -> None:
            # Only a stop that App.stop began: a start that failed half-way records no stop.
            if shutdown.begun:
                payload: dict[str, JsonValue] = {"actor": SERVICE}
                await _append_or_warn(
                    store, EntryKind.SERVICE_STOPPED, payload, seconds=STOP_ENTRY_SECONDS
                )

        # Once the ports have drained (stop_serving, below): the rounds' completion stops, then
        # the stop is recorded, before the background tasks and the store.
        parts.push_async_callback(record_stop)
        parts.push_async_callback(completion.stop)
        webs = [bound for bound in (web, metrics_web) if bound is not None]

        async def stop_serving() -> None:
            # Calls still running now have overrun the grace period; the transport cancels
            # them. The HTTP ports stop beside it: they only read, so their requests need the
            # store until then. A start that failed stops at once.
            grace = shutdown.left(settings.grace_seconds) if shutdown.begun else None
            await asyncio.gather(server.stop(grace), *(bound.stop() for bound in webs))

        parts.push_async_callback(stop_serving)
        scraped: Scrapeable | None = metrics
        if metrics is not None and role is not None:
            metrics.registry.register(WorkerCollector(role))
            own = WebServer.bind_unix(str(role.metrics_socket()))
            parts.push_async_callback(own.stop)
            await own.serve(metrics_application(metrics), 1.0, connections=http_connections)
            scraped = WorkerMetrics(metrics, role)
        if web is not None:
            await web.start(
                dealer,
                store,
                settings.grace_seconds,
                scraped,
                quorum,
                connections=http_connections,
                public_round_listing=settings.public_round_listing,
            )
        if metrics_web is not None:
            assert scraped is not None
            await metrics_web.serve(
                metrics_application(scraped), settings.grace_seconds, connections=http_connections
            )
        if metrics is not None:
            for name, bound in (("page", web), ("metrics", metrics_web)):
                if bound is not None and bound.edge is not None:
                    metrics.watch_http_port(name, bound.edge)
        tokens.start()
        if witnessing is not None:
            await witnessing.start()
        log.info(
            "serving",
            listen=settings.listen,
            port=port,
            version=__version__,
            database=redacted_url(settings.database_url),
            origin=signer.origin,
            key=signer.vkey,
            tls=settings.tls_cert is not None,
            mtls=settings.tls_client_ca is not None,
            reflection=settings.reflection,
            public_round_listing=settings.public_round_listing,
            deal_deadline_seconds=settings.deal_deadline_seconds,
            settle_deadline_seconds=settings.settle_deadline_seconds,
            http_listen=settings.http_listen or None,
            http_port=None if web is None else web.port,
            metrics_listen=settings.metrics_listen or None,
            metrics_port=None if metrics_web is None else metrics_web.port,
            descriptors=descriptors,
            http_connections_per_port=http_connections if webs else None,
            grpc_connections=grpc_connections,
            tracing=tracing is not None,
            witnesses=[endpoint.key.name for endpoint in endpoints] or None,
            witness_quorum=quorum.threshold if endpoints else None,
        )
        return App(
            server=server,
            port=port,
            store=store,
            tail=tail,
            health=health_servicer,
            streams=streams,
            shutdown=shutdown,
            storage=storage,
            interceptor=interceptor,
            settings=settings,
            tokens=tokens,
            parts=parts.pop_all(),
            new_operator_token=new_token,
            web=web,
            metrics=metrics,
            metrics_web=metrics_web,
            tracing=tracing,
            witnessing=witnessing,
            software=software,
        )


async def _append_or_warn(
    store: Store, kind: EntryKind, payload: dict[str, JsonValue], *, seconds: float | None
) -> None:
    """Append an event of the service's own, waiting at most ``seconds`` (None: until the store
    answers, at the log's stall bound at the latest); if it cannot be written in that time, one
    WARNING says so and nothing else happens: the event must not stop what the service does."""
    try:
        if seconds is None:
            await store.run_async(lambda tx: tx.append(kind, payload))
            return
        # The deadline lets a stalled log answer early; the timeout bounds a step still running.
        async with asyncio.timeout(seconds):
            await store.run_async(
                lambda tx: tx.append(kind, payload), deadline=monotonic() + seconds
            )
    except (StoreError, TimeoutError) as error:
        log.warning(
            "audit entry not written",
            kind=str(kind),
            error=str(error) or type(error).__name__,
            waited_seconds=seconds,
        )


def _on_storage_failure(
    storage: StorageHealth, metrics: Metrics | None
) -> Callable[[StoreUnavailable], None]:
    """What a call that could not use the store sets off: an outage episode, and a count."""
    if metrics is None:
        return storage.failed

    def failed(error: StoreUnavailable) -> None:
        metrics.storage_failed()
        storage.failed(error)

    return failed


def _tracing(mode: str) -> Tracing:
    """Tracing for ``--tracing`` ``mode``; imported only now, and only if installed."""
    try:
        from gnau_service.server.grpc.tracing import Tracing  # noqa: PLC0415  (only if on)
    except ImportError as error:
        raise RuntimeError(
            f"--tracing {mode} needs OpenTelemetry ({error.name} is missing): install the "
            "tracing extra, pip install 'gnau-service[tracing]'"
        ) from None
    return Tracing.exporting(mode)


async def _set_dealing(servicer: health.aio.HealthServicer, serving: bool) -> None:
    """The health of everything that needs to write: the server as a whole and DealerService.
    AuditService only reads, and may still answer."""
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in ("", DEALER_SERVICE):
        await servicer.set(name, status)


@asynccontextmanager
async def running(
    settings: Settings,
    *,
    tracing: Tracing | None = None,
    installation: Callable[[], Installation] = Installation.running,
    software_check_seconds: float = DAILY_SECONDS,
) -> AsyncIterator[App]:
    app = await start(
        settings,
        tracing=tracing,
        installation=installation,
        software_check_seconds=software_check_seconds,
    )
    try:
        yield app
    finally:
        await app.stop()


async def serve(
    settings: Settings, on_started: Callable[[App], None], role: WorkerRole | None = None
) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully; reread the tokens on SIGHUP. A
    worker (``role``) tells its supervisor once it serves."""
    # The handlers come first: a signal arriving while the service starts (after its "serving"
    # line, say) must stop it gracefully, not kill it with the default action.
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    started: list[App] = []  # a SIGHUP during the start has nothing to reread: the start reads

    def reread_tokens() -> None:
        for app in started:
            app.tokens.reload("SIGHUP")

    loop.add_signal_handler(signal.SIGHUP, reread_tokens)
    # A signal during the start (while it waits for the database, say) stops it there: the
    # parts already made stop as after a failed start.
    starting = asyncio.ensure_future(start(settings, role=role))
    signalled = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        log.info("stopped before serving")
        return
    signalled.cancel()
    app = starting.result()
    started.append(app)
    gc_tuning.settle_after_start()
    on_started(app)
    heartbeat = None if role is None else role.say_ready()
    await stopping.wait()
    if heartbeat is not None:
        heartbeat.cancel()
    log.info("shutting down", grace_seconds=settings.grace_seconds)
    await app.stop()
    exit_within()


def _channel_options(
    settings: Settings, connections: int, *, reuse_port: bool
) -> list[tuple[str, int]]:
    keepalive_ms = int(settings.keepalive_seconds * 1000)
    return [
        # A second service on a taken port must fail to start, not share the port's calls;
        # the workers of one supervisor share theirs (the supervisor holds it: supervisor.py).
        ("grpc.so_reuseport", int(reuse_port)),
        *grpc_port_options(connections),
        # A request is read only up to the largest legitimate one; answers (receipts, entries)
        # may be larger, up to the setting.
        ("grpc.max_receive_message_length", MAX_GRPC_REQUEST_BYTES),
        # And no more of a request is let in at once: a stream's receive window stays at one
        # request (gRPC would otherwise grow it to megabytes as it estimates the bandwidth), so a
        # call refused before its body is read leaves at most that much in the server's buffers.
        ("grpc.http2.bdp_probe", 0),
        ("grpc.http2.lookahead_bytes", MAX_GRPC_REQUEST_BYTES),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.keepalive_time_ms", keepalive_ms),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _bind(server: grpc.aio.Server, settings: Settings) -> int:
    try:
        return _add_port(server, settings)
    except RuntimeError:
        # gRPC says only "Failed to bind ... set GRPC_VERBOSITY=debug": ask the OS why.
        raise _bind_failure(settings.listen) from None


def _bind_failure(address: str) -> OSError:
    """Why ``address`` cannot be listened on, in the words of the OS, naming the setting."""
    reason, number = "it cannot be listened on", 0
    try:
        host, port = split_host_port(address)
        where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        with socket.socket(where[0][0], socket.SOCK_STREAM) as probe:
            probe.bind(where[0][4])
    except (OSError, ValueError) as error:
        number = getattr(error, "errno", 0) or 0
        reason = getattr(error, "strerror", None) or str(error)
    return cannot_listen("listen", address, number, reason)


def _add_port(server: grpc.aio.Server, settings: Settings) -> int:
    if settings.tls_cert is None or settings.tls_key is None:
        return server.add_insecure_port(settings.listen)
    root = settings.tls_client_ca.read_bytes() if settings.tls_client_ca else None
    credentials = grpc.ssl_server_credentials(
        [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())],
        root_certificates=root,
        require_client_auth=root is not None,
    )
    return server.add_secure_port(settings.listen, credentials)
