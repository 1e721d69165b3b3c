"""The gRPC edge under hostile clients: a player's rounds, health and receipts under each attack.

Run: ``.venv/bin/python bench/bench_grpc_edge.py [--json PATH] [--attacks NAME,...]`` (about two
minutes with the defaults; ``--attacks idle,rapid-reset`` runs those alone after the clean phase).

1. ``gnau serve`` (one process, fresh SQLite file, page port and metrics port) runs under a
   1,024 open-file limit (``--descriptors``), started as bench_http_edge.py starts it, so the
   gRPC port gets what the two HTTP ports leave (``grpc_connections`` in its ``serving`` line).
   Two auditor tokens of every operator are added with ``gnau token add`` (``WatchEntries`` is
   for an auditor of every operator only; an operator token is refused it): the attacker's, and
   a second one, the honest watcher's.
2. A measuring client in this process plays whole rounds on one table over one gRPC channel,
   established at the start and kept for the whole run (Shuffle, Deal, Reveal, Settle, each
   awaited), and after each round GETs ``/rounds/{id}/receipt`` on the page port over one
   kept-alive HTTP/1.1 connection. Every 0.5 s it asks ``grpc.health.v1`` ``Check("")`` on that
   channel and on a fresh one (a newcomer's own connection); opens a ``WatchEntries`` stream
   with the second token on the established channel (OK once its first message arrives, else
   the status; then cancelled); and fetches the last receipt on a fresh HTTP connection.
3. A clean phase (``--seconds-clean``), then one phase per attack (``--seconds-attack`` each),
   every attack a separate process (this file, ``--attack NAME``, its soft descriptor limit
   raised to the hard one) at ``--attack-nice`` 19. Its sockets are bound across 127.0.0.0/8;
   a connection the server closes is opened again at once, one refused or closed within a
   second after about ``--retry`` seconds. The attacks (issue 39's table):

   ``idle``           ``--idle`` TCP connections to the gRPC port that never send a byte
   ``preface``        ``--preface`` connections that send the HTTP/2 preface and SETTINGS, then
                      nothing (PINGs and SETTINGS answered, as a client's HTTP/2 stack does)
   ``rapid-reset``    one connection at a time: HEADERS of a Shuffle call then RST_STREAM(CANCEL)
                      at once, ``--resets`` streams a connection, then a fresh connection
   ``big-bodies``     ``--big-calls`` concurrent Shuffle calls with no credentials and a
                      ``--big-bytes`` body (grpc.aio, raw bytes, four connections), again and again
   ``header-only``    ``--header-connections`` connections (one source address each) x
                      ``--header-streams`` Shuffle calls with no credentials: HEADERS without
                      END_STREAM and never a body; a stream the server ends is opened again
   ``token-streams``  the attacker's token opens ``--watch-streams`` WatchEntries streams (from
                      the log's size then) over ``--watch-sources`` source addresses, reads them
                      and holds them; a stream the server ends is opened again
   ``http-idle``      ``--http-idle`` idle connections to each of the page and metrics ports,
                      ``--per-source`` an address (bench_http_edge.py's idle abuse)

   After each attack stops: the seconds until a newcomer is served again (health on a fresh
   channel SERVING and a receipt on a fresh HTTP connection 200), at most ``--recover``; then
   ``--pause`` seconds before the next one.
4. Every 0.5 s the server's open descriptors (``/proc/PID/fd``) and resident memory; its CPU
   (``/proc/PID/stat``) around each phase.

How to read it: the targets, each phase against the clean one: health over the established
channel SERVING at every check, the median round within 2x of the clean phase's, the server
alive at the end of the phase, and its peak RSS under the clean phase's peak + ``--rss-headroom``
MiB; the exit status is 1 otherwise, with the reasons. The fresh channel's health, the second
token's streams and the HTTP newcomers are reported, not targets: a newcomer refused while an
attacker holds the gRPC port's connections (or every stream slot) is what a full cap means; the
table says which attack takes which. Server CPU per round in each phase against the clean one is
what the attack costs the dealer. The attack table counts what each attacker saw: per
connection how it ended ("closed", a GOAWAY and its code, "connect:" and the error), per call
or stream its gRPC status, "RST_STREAM" and the code of a server's reset, "held at the end" the
streams still open when it stopped. The attack process runs at nice 19 for the reason
bench_http_edge.py gives (an attacker's CPU is on other machines); its CPU is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from bench_http_edge import (
    Abuse,
    Peaks,
    RoundIds,
    Server,
    answer_status,
    connect,
    counted,
    get_request,
    percentile_ms,
    start_dealer,
)
from bench_service import GNAU, real_player
from gnau.v1 import audit_pb2, audit_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TARGET_RATIO: Final = 2.0
SAMPLE_SECONDS: Final = 0.5
HEALTH_TIMEOUT: Final = 2.0
WATCH_TIMEOUT: Final = 2.0
NEWCOMER_TIMEOUT: Final = 5.0
PHASE_GRACE: Final = 5.0  # what a phase waits past its end for a call in flight, then cuts it
QUICK_CLOSE: Final = 1.0  # a connection closed sooner waits about --retry before it is reopened
ATTACK_STOP_TIMEOUT: Final = 60.0
ATTACKS: Final = (
    "idle",
    "preface",
    "rapid-reset",
    "big-bodies",
    "header-only",
    "token-streams",
    "http-idle",
)
SHUFFLE_PATH: Final = "/gnau.v1.DealerService/Shuffle"
WATCH_PATH: Final = "/gnau.v1.AuditService/WatchEntries"
BIG_BODY_CHANNELS: Final = 4
STATUS_NAMES: Final = {code.value[0]: code.name for code in grpc.StatusCode}
H2_CONFIG: Final = h2.config.H2Configuration(client_side=True, header_encoding=None)
DONE: Final = "connection: done"


# --- the measuring client -------------------------------------------------------------------------


@dataclass
class Phase:
    """What the measuring client saw in one phase, and what the server spent."""

    name: str
    seconds: float = 0.0
    rounds: list[float] = field(default_factory=list)
    receipts: list[float] = field(default_factory=list)
    receipt_failures: Counter[str] = field(default_factory=Counter)
    round_errors: list[str] = field(default_factory=list)
    established: Counter[str] = field(default_factory=Counter)
    fresh: Counter[str] = field(default_factory=Counter)
    watch: Counter[str] = field(default_factory=Counter)
    newcomers: Counter[str] = field(default_factory=Counter)
    cut: int = 0
    dealer_cpu: float = 0.0
    client_cpu: float = 0.0
    emfile: int = 0
    peaks: Peaks = field(default_factory=Peaks)
    alive: bool = True
    exit_status: int | None = None
    recovery: float | None = None
    attack: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""

    @property
    def cpu_ms_per_round(self) -> float:
        return self.dealer_cpu * 1000 / len(self.rounds) if self.rounds else float("nan")

    @property
    def peak_descriptors(self) -> int:
        return max(self.peaks.descriptors.values(), default=0)

    @property
    def peak_rss_mib(self) -> float:
        return max(self.peaks.rss_kib.values(), default=0) / 1024


def call_code(error: grpc.aio.AioRpcError) -> str:
    return str(error.code().name)


@dataclass
class Client:
    """The measuring client: one established gRPC channel and HTTP session for the whole run."""

    target: str
    token: str
    second_token: str
    page_port: int
    dealer: Server
    channel: grpc.aio.Channel
    session: aiohttp.ClientSession
    last_round: list[str] = field(default_factory=list)

    async def run(self, phase: Phase, seconds: float) -> None:
        """Play, check and sample for ``seconds``; the phase's CPU deltas around it."""
        before, client_before, emfile_before = self._cpu(), time.process_time(), self._emfile()
        started = time.perf_counter()
        deadline = started + seconds
        tasks = [
            asyncio.create_task(coroutine)
            for coroutine in (
                self._play(phase, deadline),
                self._check_health(phase, deadline),
                self._watch(phase, deadline),
                self._newcomers(phase, deadline),
                self._sample(phase, deadline),
            )
        ]
        _, pending = await asyncio.wait(tasks, timeout=seconds + PHASE_GRACE)
        for task in pending:
            task.cancel()
            phase.cut += 1
        await asyncio.gather(*tasks, return_exceptions=True)
        phase.seconds = time.perf_counter() - started
        phase.dealer_cpu = self._cpu() - before
        phase.client_cpu = time.process_time() - client_before
        phase.emfile = self._emfile() - emfile_before
        phase.exit_status = self.dealer.process.poll()
        phase.alive = phase.exit_status is None

    def _cpu(self) -> float:
        try:
            return self.dealer.cpu_seconds()
        except OSError:
            return 0.0

    def _emfile(self) -> int:
        return self.dealer.descriptors_exhausted()

    async def _play(self, phase: Phase, deadline: float) -> None:
        play = real_player(self.channel, self.token, phase.name.split(" ")[0].lower())
        recorder = RoundIds()
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                await play(0, recorder)
            except (grpc.aio.AioRpcError, RuntimeError) as error:
                phase.round_errors.append(str(error)[:200])
                await asyncio.sleep(0.1)
                continue
            phase.rounds.append(time.perf_counter() - started)
            self.last_round[:] = [recorder.round_id]
            await self._receipt(phase, recorder.round_id)

    async def _receipt(self, phase: Phase, round_id: str) -> None:
        url = f"http://127.0.0.1:{self.page_port}/rounds/{round_id}/receipt"
        started = time.perf_counter()
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
                await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            phase.receipt_failures[type(error).__name__] += 1
            return
        if status != 200:
            phase.receipt_failures[str(status)] += 1
            return
        phase.receipts.append(time.perf_counter() - started)

    async def _check_health(self, phase: Phase, deadline: float) -> None:
        while time.perf_counter() < deadline:
            established, fresh = await asyncio.gather(
                health_check(self.channel), self.fresh_health()
            )
            phase.established[established] += 1
            phase.fresh[fresh] += 1
            await asyncio.sleep(SAMPLE_SECONDS)

    async def fresh_health(self) -> str:
        """Health over a channel of its own: a newcomer's connection, closed after."""
        options = [("grpc.use_local_subchannel_pool", 1)]
        async with grpc.aio.insecure_channel(self.target, options=options) as channel:
            return await health_check(channel)

    async def _watch(self, phase: Phase, deadline: float) -> None:
        """A WatchEntries stream with the second token every 0.5 s: admitted or refused."""
        stub = audit_pb2_grpc.AuditServiceStub(self.channel)
        metadata = (("authorization", f"Bearer {self.second_token}"),)
        while time.perf_counter() < deadline:
            call = stub.WatchEntries(
                audit_pb2.WatchEntriesRequest(start_index=0),
                metadata=metadata,
                timeout=WATCH_TIMEOUT,
            )
            try:
                message = await call.read()
                outcome = (
                    "OK" if message is not grpc.aio.EOF else f"ended {(await call.code()).name}"
                )
            except grpc.aio.AioRpcError as error:
                outcome = call_code(error)
            finally:
                call.cancel()
            phase.watch[outcome] += 1
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _newcomers(self, phase: Phase, deadline: float) -> None:
        """A fresh connection to the page port every 0.5 s, for the last receipt."""
        while time.perf_counter() < deadline:
            await asyncio.sleep(SAMPLE_SECONDS)
            if self.last_round:
                phase.newcomers[await self.newcomer_receipt()] += 1

    async def newcomer_receipt(self) -> str:
        request = get_request(f"/rounds/{self.last_round[0]}/receipt")
        try:
            async with asyncio.timeout(NEWCOMER_TIMEOUT):
                return await answer_status(("127.0.0.1", self.page_port), request, None)
        except TimeoutError:
            return "no answer"

    async def _sample(self, phase: Phase, deadline: float) -> None:
        while time.perf_counter() < deadline:
            phase.peaks.sample([self.dealer])
            await asyncio.sleep(SAMPLE_SECONDS)

    async def recover(self, limit: float) -> float | None:
        """Seconds until a newcomer is served again (fresh health SERVING, a receipt 200)."""
        started = time.perf_counter()
        while time.perf_counter() - started < limit:
            if self.dealer.process.poll() is not None:
                return None
            health, receipt = await asyncio.gather(self.fresh_health(), self.newcomer_receipt())
            if health == "SERVING" and receipt == "200":
                return time.perf_counter() - started
            await asyncio.sleep(0.2)
        return None


async def health_check(channel: grpc.aio.Channel) -> str:
    """``Check("")``: "SERVING", another status's name, or the call's error code."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=HEALTH_TIMEOUT)
    except grpc.aio.AioRpcError as error:
        return call_code(error)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


# --- tokens ---------------------------------------------------------------------------------------


def tokens_reloaded(count: int) -> Callable[[str, str], dict[str, Any] | None]:
    """A ``Server.wait_for`` check: a "tokens reloaded" line with ``count`` tokens or more."""

    def ready(stdout: str, stderr: str) -> dict[str, Any] | None:
        for line in stderr.splitlines():
            if '"tokens reloaded"' in line:
                entry: dict[str, Any] = json.loads(line)
                if int(entry.get("tokens", 0)) >= count:
                    return entry
        return None

    return ready


async def add_auditor_tokens(dealer: Server, data_dir: Path, names: Sequence[str]) -> list[str]:
    """Auditor tokens of every operator, once the running service has taken them up."""
    tokens = []
    for name in names:
        out = data_dir.parent / f"{name}.token"
        argv = [
            GNAU, "token", "add", "--role", "auditor", "--all-operators", "--name", name,
            "--data-dir", str(data_dir), "--out", str(out),
        ]  # fmt: skip
        made = subprocess.run(argv, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise RuntimeError(f"gnau token add failed: {made.stderr.strip()}")
        tokens.append(out.read_text(encoding="utf-8").strip())
    count = len(json.loads((data_dir / "tokens.json").read_text(encoding="utf-8"))["tokens"])
    await dealer.wait_for(tokens_reloaded(count))
    return tokens


async def log_size(channel: grpc.aio.Channel, token: str) -> int:
    """The size of the log's latest checkpoint."""
    stub = audit_pb2_grpc.AuditServiceStub(channel)
    answer = await stub.GetCheckpoint(
        audit_pb2.GetCheckpointRequest(),
        metadata=(("authorization", f"Bearer {token}"),),
        timeout=HEALTH_TIMEOUT * 5,
    )
    return int(answer.checkpoint.splitlines()[1])


# --- raw HTTP/2, for the attacks ------------------------------------------------------------------


def call_headers(path: str, token: str | None = None) -> list[tuple[bytes, bytes]]:
    """A gRPC call's request headers."""
    headers = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.encode()),
        (b":authority", b"127.0.0.1"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return headers


def grpc_message(payload: bytes) -> bytes:
    """A gRPC message: not compressed, a 4-byte big-endian length, the bytes."""
    return struct.pack(">BI", 0, len(payload)) + payload


def h2_error(code: int | None) -> str:
    """An HTTP/2 error code's name (its number if h2 knows none)."""
    try:
        return h2.errors.ErrorCodes(code or 0).name
    except ValueError:
        return str(code)


def stream_outcome(event: h2.events.Event) -> tuple[int, str] | None:
    """A stream's end in ``event``, if it ends one: its gRPC status or the server's reset."""
    if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
        status = dict(event.headers or []).get(b"grpc-status")
        if status is not None and event.stream_id is not None:
            return event.stream_id, STATUS_NAMES.get(int(status), status.decode())
    elif isinstance(event, h2.events.StreamReset) and event.stream_id is not None:
        return event.stream_id, f"RST_STREAM {h2_error(event.error_code)}"
    return None


class Link:
    """A raw HTTP/2 connection: h2's state machine on an asyncio stream. h2 answers the
    server's SETTINGS and PINGs itself; received data is acknowledged, so flow control never
    holds the server's writes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h2 = h2.connection.H2Connection(H2_CONFIG)
        self.h2.initiate_connection()
        self.open: set[int] = set()
        self.answered: set[int] = set()
        self.flush()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    def start(self, headers: list[tuple[bytes, bytes]], body: bytes | None = None) -> int:
        """A new stream: HEADERS, and ``body`` with END_STREAM if given (else none)."""
        stream = self.h2.get_next_available_stream_id()
        self.h2.send_headers(stream, headers)
        if body is not None:
            self.h2.send_data(stream, body, end_stream=True)
        self.open.add(stream)
        return stream

    async def run(
        self,
        on_end: Callable[[int, str], None] | None = None,
        on_answer: Callable[[int], None] | None = None,
    ) -> str:
        """Read until the connection ends; how it ended. ``on_end``: each stream's end (its
        gRPC status or the server's reset); ``on_answer``: each stream's first message."""
        while True:
            try:
                data = await self.reader.read(65536)
            except (ConnectionError, OSError):
                return "connection: reset"
            if not data:
                return "connection: closed"
            try:
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError as error:
                return f"connection: protocol error ({type(error).__name__})"
            for event in events:
                if isinstance(event, h2.events.DataReceived) and event.stream_id is not None:
                    length = event.flow_controlled_length or 0
                    with contextlib.suppress(h2.exceptions.StreamClosedError):
                        self.h2.acknowledge_received_data(length, event.stream_id)
                    if event.stream_id in self.open and event.stream_id not in self.answered:
                        self.answered.add(event.stream_id)
                        if on_answer is not None:
                            on_answer(event.stream_id)
                if isinstance(event, h2.events.ConnectionTerminated):
                    self.flush()
                    return f"connection: GOAWAY {h2_error(event.error_code)}"
                ended = stream_outcome(event)
                if ended is not None and ended[0] in self.open:
                    self.open.discard(ended[0])
                    if on_end is not None:
                        on_end(*ended)
            self.flush()
            try:
                await self.writer.drain()
            except (ConnectionError, OSError):
                return "connection: reset"


# --- the attacks (a child process) ----------------------------------------------------------------


Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[str]]


@dataclass
class Attack:
    """One attack on the dealer's ports; what it saw, counted."""

    name: str
    settings: dict[str, Any]
    stop: asyncio.Event
    counts: Counter[str] = field(default_factory=Counter)
    links: set[Link] = field(default_factory=set)
    http: list[Abuse] = field(default_factory=list)

    @property
    def grpc(self) -> tuple[str, int]:
        return ("127.0.0.1", int(self.settings["grpc_port"]))

    def tasks(self) -> list[asyncio.Task[None]]:
        """Every connection's task of the attack, its sources in the /16 of the attack's own."""
        made = self._http_idle() if self.name == "http-idle" else []
        return made + [asyncio.create_task(coroutine) for coroutine in self._coroutines()]

    def _coroutines(self) -> list[Coroutine[Any, Any, None]]:
        s = self.settings
        block = 10 + ATTACKS.index(self.name)
        per_source = s["per_source"]

        def shared(i: int) -> str:  # ``per_source`` connections an address
            return f"127.{block}.{1 + i // per_source}.1"

        def own(i: int) -> str:  # one address a connection
            return f"127.{block}.{1 + i // 250}.{1 + i % 250}"

        match self.name:
            case "idle":
                return [self._keep(shared(i), i, self._idle) for i in range(s["idle"])]
            case "preface":
                return [self._keep(shared(i), i, self._preface) for i in range(s["preface"])]
            case "rapid-reset":
                return [self._keep(own(0), 0, self._rapid_reset)]
            case "big-bodies":
                return [self._big_bodies(channel) for channel in range(BIG_BODY_CHANNELS)]
            case "header-only":
                held = self._streams(None, s["header_streams"], None)
                return [self._keep(own(i), i, held) for i in range(s["header_connections"])]
            case "token-streams":
                sources = s["watch_sources"]
                body = grpc_message(
                    audit_pb2.WatchEntriesRequest(start_index=s["start_index"]).SerializeToString()
                )
                made = []
                for i in range(sources):
                    share = s["watch_streams"] // sources + (i < s["watch_streams"] % sources)
                    made.append(self._keep(own(i), i, self._streams(s["token"], share, body)))
                return made
            case "http-idle":
                return []
        raise ValueError(f"no attack {self.name!r}")

    async def _ramp(self, position: int) -> None:
        s = self.settings
        await asyncio.sleep(position // s["batch"] * s["batch_seconds"])

    async def _pause(self) -> None:
        retry = self.settings["retry"]
        await asyncio.sleep(random.uniform(retry / 2, retry * 1.5))

    async def _keep(self, source: str, position: int, session: Session) -> None:
        """A connection from ``source`` running ``session``; again once it ends."""
        await self._ramp(position)
        while not self.stop.is_set():
            connected = await connect(self.grpc, source)
            if isinstance(connected, str):
                self.counts[connected] += 1
                await self._pause()
                continue
            reader, writer = connected
            opened = time.monotonic()
            try:
                outcome = await session(reader, writer)
            except (ConnectionError, OSError):
                outcome = "connection: reset"
            finally:
                writer.close()
            self.counts[outcome] += 1
            if outcome != DONE and time.monotonic() - opened < QUICK_CLOSE:
                await self._pause()

    async def _idle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Send nothing; read (and drop) whatever the server sends until it closes."""
        while await reader.read(65536):
            pass
        return "connection: closed"

    async def _preface(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        link = Link(reader, writer)
        return await link.run()

    async def _rapid_reset(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """``resets`` streams opened and cancelled at once, 100 at a time, then done."""
        link = Link(reader, writer)
        reading = asyncio.create_task(link.run())
        headers = call_headers(SHUFFLE_PATH)
        sent = 0
        try:
            while sent < self.settings["resets"] and not reading.done():
                for _ in range(100):
                    stream = link.h2.get_next_available_stream_id()
                    link.h2.send_headers(stream, headers)
                    link.h2.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
                link.flush()
                await writer.drain()
                sent += 100
                self.counts["stream: reset by us"] += 100
        except h2.exceptions.ProtocolError:
            pass
        if reading.done():
            return reading.result()
        reading.cancel()
        return DONE

    def _streams(self, token: str | None, count: int, body: bytes | None) -> Session:
        """A session holding ``count`` calls open: HEADERS (with ``body`` and END_STREAM if
        given, else no END_STREAM and never a body); one the server ends is opened again after
        about ``--retry`` seconds."""
        headers = call_headers(WATCH_PATH if body is not None else SHUFFLE_PATH, token)

        async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
            link = Link(reader, writer)
            self.links.add(link)

            def ended(stream: int, outcome: str) -> None:
                self.counts[f"stream: {outcome}"] += 1

            def answered(stream: int) -> None:
                self.counts["stream: first message"] += 1

            async def top_up() -> None:
                while True:
                    with contextlib.suppress(h2.exceptions.ProtocolError):
                        for _ in range(count - len(link.open)):
                            link.start(headers, body)
                        link.flush()
                    await self._pause()

            topping = asyncio.create_task(top_up())
            reading = asyncio.create_task(link.run(ended, answered))
            try:
                return await reading
            finally:
                topping.cancel()
                self.links.discard(link)

        return session

    async def _big_bodies(self, channel_number: int) -> None:
        """``big_calls`` / 4 calls at once on one connection of its own, again and again."""
        s = self.settings
        payload = random.randbytes(s["big_bytes"])
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", -1)]
        target = f"{self.grpc[0]}:{self.grpc[1]}"
        calls = s["big_calls"] // BIG_BODY_CHANNELS + (
            channel_number < s["big_calls"] % BIG_BODY_CHANNELS
        )
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            shuffle: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
                SHUFFLE_PATH
            )  # bytes in and out

            async def caller() -> None:
                while not self.stop.is_set():
                    try:
                        await shuffle(payload, timeout=10.0)
                        self.counts["call: OK"] += 1
                    except grpc.aio.AioRpcError as error:
                        self.counts[f"call: {call_code(error)}"] += 1

            await asyncio.gather(*(caller() for _ in range(calls)))

    def _http_idle(self) -> list[asyncio.Task[None]]:
        """bench_http_edge's idle abuse on the page and metrics ports, nothing else."""
        s = self.settings
        settings = {**s, "idle": s["http_idle"], "slowloris": 0, "flood": 0, "post_path": "/"}
        made: list[asyncio.Task[None]] = []
        for block, (port_name, port) in enumerate(s["http_ports"], 1):
            abuse = Abuse(port_name, ("127.0.0.1", port), settings, self.stop)
            self.http.append(abuse)
            made += abuse.tasks(block)
        return made

    def result(self) -> dict[str, int]:
        counts = Counter(self.counts)
        held = sum(len(link.open) for link in self.links)
        if held:
            counts["stream: held at the end"] += held
        for abuse in self.http:
            for (kind, status), n in abuse.counts.items():
                counts[f"{abuse.name} {kind}: {status}"] += n
        return dict(counts)


async def attack(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Run the attack until SIGTERM; what it saw."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    running = Attack(name, settings, stop)
    tasks = running.tasks()
    print(json.dumps({"started": True, "descriptors": hard}), flush=True)
    await stop.wait()
    counts = running.result()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    failed = [task.exception() for task in tasks if not task.cancelled() and task.exception()]
    return {"counts": counts, "errors": sorted({repr(error)[:200] for error in failed})}


def run_attack(name: str, encoded: str) -> None:
    settings = json.loads(encoded)
    os.nice(settings["nice"])  # here, not in a preexec_fn: the parent's gRPC threads are running
    result = asyncio.run(attack(name, settings))
    result["cpu_seconds"] = time.process_time()
    print(json.dumps(result), flush=True)


@dataclass
class AttackProcess:
    """The child running one attack, its stderr in a file."""

    process: subprocess.Popen[str]
    stderr: Path

    @classmethod
    def start(cls, name: str, settings: dict[str, Any], directory: Path) -> AttackProcess | str:
        stderr = directory / f"attack-{name}.stderr"
        argv = [
            sys.executable, str(Path(__file__).resolve()), "--attack", name,
            "--settings", json.dumps(settings),
        ]  # fmt: skip
        with stderr.open("w") as err:
            process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert process.stdout is not None
        started = process.stdout.readline()
        child = cls(process, stderr)
        try:
            if json.loads(started).get("started"):
                return child
        except ValueError:
            pass
        process.kill()
        process.wait()
        return f"the attack did not start: {child.tail()}"

    def tail(self) -> str:
        text = self.stderr.read_text(encoding="utf-8", errors="replace")
        return " | ".join(text.strip().splitlines()[-3:]) or "(no stderr)"

    def stop(self) -> dict[str, Any]:
        self.process.send_signal(signal.SIGTERM)
        try:
            output, _ = self.process.communicate(timeout=ATTACK_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return {"counts": {}, "errors": ["did not stop; killed"], "cpu_seconds": 0.0}
        try:
            result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"counts": {}, "errors": [f"no result: {self.tail()}"], "cpu_seconds": 0.0}
        return result


def attack_settings(arguments: argparse.Namespace, serving: dict[str, Any]) -> dict[str, Any]:
    """What every attack is told: the ports and the sizes from the arguments."""
    return {
        "grpc_port": serving["port"],
        "http_ports": [["page", serving["http_port"]], ["metrics", serving["metrics_port"]]],
        "idle": arguments.idle,
        "preface": arguments.preface,
        "resets": arguments.resets,
        "big_calls": arguments.big_calls,
        "big_bytes": arguments.big_bytes,
        "header_connections": arguments.header_connections,
        "header_streams": arguments.header_streams,
        "watch_streams": arguments.watch_streams,
        "watch_sources": arguments.watch_sources,
        "http_idle": arguments.http_idle,
        "per_source": arguments.per_source,
        "retry": arguments.retry,
        "batch": 100,
        "batch_seconds": 0.05,
        "token": "",
        "start_index": 0,
        "drip": 3.0,
        "nice": arguments.attack_nice,
    }


# --- reporting ------------------------------------------------------------------------------------


def ratio(phase: Phase, clean: Phase) -> float:
    if not phase.rounds or not clean.rounds:
        return float("inf")
    return percentile_ms(phase.rounds, 0.5) / percentile_ms(clean.rounds, 0.5)


def rounds_cell(phase: Phase) -> str:
    p50, p99 = percentile_ms(phase.rounds, 0.5), percentile_ms(phase.rounds, 0.99)
    failed = f" ({len(phase.round_errors)} failed)" if phase.round_errors else ""
    return f"{len(phase.rounds):,}{failed}: {p50:.1f} / {p99:.1f}"


def receipts_cell(phase: Phase) -> str:
    failed = f" ({counted(phase.receipt_failures)} failed)" if phase.receipt_failures else ""
    return f"{percentile_ms(phase.receipts, 0.5):.1f}{failed}"


def phase_table(phases: Sequence[Phase], clean: Phase) -> list[str]:
    lines = [
        "| phase | s | rounds: p50 / p99 ms | p50 vs clean | receipt p50 ms | "
        "health, established | health, fresh channel | 2nd token's WatchEntries | "
        "HTTP newcomers | peak fds | EMFILE logged | peak RSS MiB | server CPU s | "
        "CPU ms/round | alive | recovered in s |",
        "|---|---:|---:|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for p in phases:
        if p.skipped:
            lines.append(f"| {p.name} | not run: {p.skipped} |" + " |" * 14)
            continue
        recovered = "—" if p is clean else "no" if p.recovery is None else f"{p.recovery:.1f}"
        alive = "yes" if p.alive else f"NO (exit {p.exit_status})"
        lines.append(
            f"| {p.name} | {p.seconds:.1f} | {rounds_cell(p)} | {ratio(p, clean):.2f} | "
            f"{receipts_cell(p)} | {counted(p.established)} | {counted(p.fresh)} | "
            f"{counted(p.watch)} | {counted(p.newcomers)} | {p.peak_descriptors:,} | "
            f"{p.emfile:,} | {p.peak_rss_mib:.1f} | {p.dealer_cpu:.2f} | "
            f"{p.cpu_ms_per_round:.1f} | {alive} | {recovered} |"
        )
    return lines


def attack_table(phases: Sequence[Phase]) -> list[str]:
    lines = ["| attack | attacker CPU s | what it saw |", "|---|---:|---|"]
    for p in phases:
        if not p.attack:
            continue
        counts = Counter(p.attack.get("counts", {}))
        errors = "; ".join(p.attack.get("errors", []))
        seen = counted(counts) + (f"; errors: {errors}" if errors else "")
        lines.append(f"| {p.name} | {p.attack.get('cpu_seconds', 0.0):.1f} | {seen} |")
    return lines


def verdicts(phases: Sequence[Phase], clean: Phase, headroom_mib: float) -> list[str]:
    """Why the run fails, if it does."""
    problems = []
    rss_bound = clean.peak_rss_mib + headroom_mib
    for p in phases:
        if p.skipped:
            problems.append(f"{p.name}: not run ({p.skipped})")
            continue
        bad = {key: n for key, n in p.established.items() if key != "SERVING"}
        if bad or not p.established:
            problems.append(
                f"{p.name}: health over the established channel not SERVING: "
                f"{counted(Counter(bad)) if bad else 'no check answered'}"
            )
        if p is not clean and not ratio(p, clean) <= TARGET_RATIO:
            problems.append(
                f"{p.name}: the median round is {ratio(p, clean):.2f}x the clean one "
                f"({len(p.rounds)} rounds, {len(p.round_errors)} failed)"
            )
        if not p.alive:
            problems.append(f"{p.name}: the server exited {p.exit_status}")
        if p.peak_rss_mib >= rss_bound:
            problems.append(
                f"{p.name}: peak RSS {p.peak_rss_mib:.0f} MiB, over the bound of "
                f"{rss_bound:.0f} MiB (clean peak + {headroom_mib:.0f})"
            )
    return problems


def as_json(phases: Sequence[Phase], clean: Phase, serving: dict[str, Any]) -> Any:
    return {
        "serving": {
            key: serving.get(key)
            for key in ("descriptors", "grpc_connections", "http_connections_per_port")
        },
        "phases": [
            {
                "name": p.name,
                "skipped": p.skipped,
                "seconds": p.seconds,
                "rounds": len(p.rounds),
                "round_ms": [percentile_ms(p.rounds, 0.5), percentile_ms(p.rounds, 0.99)],
                "round_p50_vs_clean": ratio(p, clean),
                "round_errors": p.round_errors[:10],
                "receipt_ms": [percentile_ms(p.receipts, 0.5), percentile_ms(p.receipts, 0.99)],
                "receipt_failures": dict(p.receipt_failures),
                "health_established": dict(p.established),
                "health_fresh": dict(p.fresh),
                "second_token_watch": dict(p.watch),
                "http_newcomers": dict(p.newcomers),
                "peak_descriptors": p.peak_descriptors,
                "peak_rss_mib": p.peak_rss_mib,
                "server_cpu_seconds": p.dealer_cpu,
                "server_cpu_ms_per_round": p.cpu_ms_per_round,
                "client_cpu_seconds": p.client_cpu,
                "emfile_logged": p.emfile,
                "cut_at_end": p.cut,
                "alive": p.alive,
                "exit_status": p.exit_status,
                "recovered_seconds": p.recovery,
                "attack": p.attack,
            }
            for p in phases
        ],
    }


# --- main -----------------------------------------------------------------------------------------


async def run_benchmark(arguments: argparse.Namespace) -> int:
    chosen = [name.strip() for name in arguments.attacks.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(ATTACKS))
    if unknown:
        print(f"unknown attack(s): {', '.join(unknown)}; choose from {', '.join(ATTACKS)}")
        return 2
    print(
        f"Gnau gRPC edge benchmark: {len(chosen)} attacks of {arguments.seconds_attack:g} s "
        f"after {arguments.seconds_clean:g} s clean; server under RLIMIT_NOFILE "
        f"{arguments.descriptors}; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory(prefix="gnau-bench-grpc-edge-") as temp:
        directory = Path(temp)
        dealer, serving = await start_dealer(directory, arguments.descriptors)
        try:
            tokens = await add_auditor_tokens(
                dealer, directory / "dealer-data", ("bench-attacker", "bench-watcher")
            )
            print(
                f"  gnau serve: {serving.get('descriptors')} descriptors, "
                f"{serving.get('grpc_connections')} gRPC connections, "
                f"{serving.get('http_connections_per_port')} per HTTP port"
            )
            return await measure(
                arguments, directory, dealer=dealer, serving=serving, tokens=tokens, chosen=chosen
            )
        finally:
            status = dealer.stop()
            if status != 0:
                print(f"  {dealer.name} exited {status}: {dealer.tail()}")


async def measure(
    arguments: argparse.Namespace,
    directory: Path,
    *,
    dealer: Server,
    serving: dict[str, Any],
    tokens: Sequence[str],
    chosen: Sequence[str],
) -> int:
    attacker_token, watcher_token = tokens
    target = f"127.0.0.1:{serving['port']}"
    async with (
        grpc.aio.insecure_channel(target) as channel,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session,
    ):
        client = Client(
            target, serving["token"], watcher_token, serving["http_port"], dealer, channel, session
        )
        await client.run(Phase("warm-up"), arguments.seconds_warmup)
        clean = Phase("clean")
        print(f"\nclean: {arguments.seconds_clean:g} s of rounds, receipts and checks, no attack")
        await client.run(clean, arguments.seconds_clean)
        phases = [clean]
        for name in chosen:
            phase = Phase(name)
            phases.append(phase)
            if dealer.process.poll() is not None:
                phase.skipped = f"the server exited {dealer.process.returncode}"
                continue
            settings = attack_settings(arguments, serving)
            if name == "token-streams":
                settings["token"] = attacker_token
                with contextlib.suppress(grpc.aio.AioRpcError, ValueError, IndexError):
                    settings["start_index"] = await log_size(channel, attacker_token)
            print(f"{name}: {arguments.seconds_attack:g} s under attack (separate process)")
            child = AttackProcess.start(name, settings, directory)
            if isinstance(child, str):
                phase.skipped = child
                continue
            try:
                await client.run(phase, arguments.seconds_attack)
            finally:
                phase.attack = child.stop()
            phase.recovery = await client.recover(arguments.recover)
            await asyncio.sleep(arguments.pause)
    return report(arguments, phases, clean, dealer, serving)


def report(
    arguments: argparse.Namespace,
    phases: Sequence[Phase],
    clean: Phase,
    dealer: Server,
    serving: dict[str, Any],
) -> int:
    print("\n" + "\n".join(phase_table(phases, clean)))
    print(f"\nWhat each attacker saw (attack processes at nice {arguments.attack_nice})\n")
    print("\n".join(attack_table(phases)))
    print(
        f"\n  server: VmHWM {dealer.memory_kib('VmHWM') / 1024:.1f} MiB, "
        f"{dealer.descriptors_exhausted()} EMFILE errors logged, log lines "
        f"{counted(dealer.log_levels())}"
        if dealer.process.poll() is None
        else f"\n  server exited {dealer.process.returncode}: {dealer.tail()}"
    )
    stderr = dealer.stderr.read_text(encoding="utf-8", errors="replace")
    errors = [line for line in stderr.splitlines() if '"error"' in line or '"critical"' in line]
    for line in errors[:3]:
        print(f"  {dealer.name} logged: {line[:300]}")
    for phase in phases:
        for line in phase.round_errors[:2]:
            print(f"  {phase.name}: round failed: {line}")
        if phase.cut:
            print(
                f"  {phase.name}: {phase.cut} measuring task(s) cut {PHASE_GRACE:g} s past the end"
            )
    print()
    problems = verdicts(phases, clean, arguments.rss_headroom)
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(as_json(phases, clean, serving), indent=2))
    for problem in problems:
        print(f"  FAIL: {problem}")
    if not problems:
        print(
            "  PASS: established health SERVING throughout, round medians within 2x, "
            "server alive, RSS within its bound"
        )
    return 1 if problems else 0


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    add = parser.add_argument
    add("--attacks", default=",".join(ATTACKS), help=f"which, in order ({','.join(ATTACKS)})")
    add("--idle", type=int, default=1500, help="idle: connections (1500)")
    add("--preface", type=int, default=500, help="preface: connections (500)")
    add("--resets", type=int, default=5000, help="rapid-reset: streams a connection (5000)")
    add("--big-calls", type=int, default=200, help="big-bodies: calls at once (200)")
    add("--big-bytes", type=int, default=1_000_000, help="big-bodies: bytes a call (1000000)")
    add("--header-connections", type=int, default=22, help="header-only: connections (22)")
    add("--header-streams", type=int, default=50, help="header-only: streams a connection (50)")
    add("--watch-streams", type=int, default=600, help="token-streams: streams (600)")
    add("--watch-sources", type=int, default=40, help="token-streams: source addresses (40)")
    add("--http-idle", type=int, default=2000, help="http-idle: connections per port (2000)")
    add("--per-source", type=int, default=100, help="idle attacks: connections an address (100)")
    add("--retry", type=float, default=1.0, help="mean seconds before a refused one retries (1)")
    add("--seconds-warmup", type=float, default=2.0, help="rounds before the clean phase (2)")
    add("--seconds-clean", type=float, default=15.0, help="the clean phase's seconds (15)")
    add("--seconds-attack", type=float, default=8.0, help="each attack's seconds (8)")
    add("--recover", type=float, default=10.0, help="most seconds to wait for a newcomer (10)")
    add("--pause", type=float, default=2.0, help="seconds between attacks (2)")
    add("--descriptors", type=int, default=1024, help="the server's RLIMIT_NOFILE (1024)")
    add("--rss-headroom", type=float, default=256.0, help="MiB over the clean peak RSS (256)")
    add("--attack-nice", type=int, default=19, help="the attack processes' niceness (19)")
    add("--json", type=Path, help="also write the figures here")
    add("--attack", choices=ATTACKS, help=argparse.SUPPRESS)
    add("--settings", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    if arguments.attack is not None:
        run_attack(arguments.attack, arguments.settings or "{}")
        return
    sys.exit(asyncio.run(run_benchmark(arguments)))


if __name__ == "__main__":
    main()
