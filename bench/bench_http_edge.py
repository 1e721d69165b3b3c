"""The HTTP edge under abuse: a player's rounds and receipts while every HTTP port is attacked.

Run: ``.venv/bin/python bench/bench_http_edge.py [--json PATH]`` (about a minute with the
defaults).

1. ``gnau serve`` (fresh SQLite file, page port and metrics port) and ``gnau witness serve`` run
   in their own processes, each under a 1,024 open-file limit (``--descriptors``), so the
   dealer gives each of its two HTTP ports 256 connections and the witness its one port 640.
2. A measuring client in this process plays whole rounds on one table over gRPC (Shuffle, Deal,
   Reveal, Settle, each awaited) and after each round GETs ``/rounds/{id}/receipt`` on the page
   port over one kept-alive HTTP/1.1 connection (a player whose page is open). Every 0.5 s it
   asks gRPC health for ``""`` and ``gnau.v1.DealerService``, and opens a *fresh* connection to
   the page port for the last receipt (a newcomer), whose answers are counted.
3. Phase A (``--seconds-clean``): that client alone. Phase B (``--seconds-abuse``): the same,
   while a separate process (this file, ``--abuse``, its soft descriptor limit raised to the
   hard one) attacks each of the three HTTP ports (page, metrics, witness) at once:
   ``--idle`` connections that never send a byte, ``--slowloris`` connections that send a
   request line and then one header byte every ``--drip`` seconds, and ``--flood`` workers
   sending malformed requests on fresh connections (bad bytes in the request line, an
   over-long line, 200 headers, broken chunked framing, ``Content-Length: 104857600`` with no
   body, the same with ``Expect: 100-continue``, a gzip body of garbage on the witness's POST
   path, random bytes). Its sockets are bound across 127.0.0.0/8 (``--per-source`` to an
   address), so the port's total cap binds as well as the per-peer one; a connection closed
   by the server is opened again, one refused after ``--retry`` seconds.
4. Every 0.5 s, both servers' open descriptors (``/proc/PID/fd``) and resident memory.

How to read it: the target is the issue's: medians of phase B within 2x of phase A's (round and
receipt), and health SERVING at every check; the exit status is 1 otherwise, with the reason.
Server CPU per round in each phase is the same-run baseline: what the abuse costs the dealer.
The abuse table counts each port's answers by status ("closed": closed with no status line).
Newcomers refused during phase B are what a full connection cap means, not a latency figure.
On 2 shared cores the abuse process competes with the servers and the client for CPU. A real
attacker's CPU is on other machines: what it costs the server is the server's side of each
connection. So the abuse process runs at ``--abuse-nice`` 19 by default (it gets the CPU the
servers leave idle); ``--abuse-nice 0`` gives it an equal share, which measures this machine's
two cores more than the edge. Its own CPU is printed either way.
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
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import grpc
from bench_service import GNAU, SHUFFLE, Recorder, free_port, real_player
from grpc_health.v1 import health_pb2, health_pb2_grpc

TARGET_RATIO: Final = 2.0
SAMPLE_SECONDS: Final = 0.5
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 20.0
HEALTH_TIMEOUT: Final = 2.0
CONNECT_TIMEOUT: Final = 5.0
ANSWER_TIMEOUT: Final = 15.0  # longer than the edge's 10 s header and body deadlines
HEALTH_SERVICES: Final = ("", "gnau.v1.DealerService")
PORT_NAMES: Final = ("page", "metrics", "witness")
WITNESS_POST: Final = "/add-checkpoint"
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")


# --- the servers ----------------------------------------------------------------------------------


def limit_descriptors(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child's RLIMIT_NOFILE, soft and hard, is ``limit``."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


@dataclass
class Server:
    """A server process under a descriptor limit; stdout and stderr in files."""

    name: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    @classmethod
    def start(cls, name: str, argv: Sequence[str], directory: Path, limit: int) -> Server:
        stdout, stderr = directory / f"{name}.stdout", directory / f"{name}.stderr"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            # No thread of this process is running yet when the servers start.
            limited = limit_descriptors(limit)
            process = subprocess.Popen(list(argv), stdout=out, stderr=err, preexec_fn=limited)  # noqa: PLW1509
        return cls(name, process, stdout, stderr)

    async def wait_for(self, ready: Callable[[str, str], dict[str, Any] | None]) -> dict[str, Any]:
        """Wait until ``ready(stdout, stderr)`` gives what it looks for."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            found = ready(_text(self.stdout), _text(self.stderr))
            if found is not None:
                return found
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.process.returncode}: {self.tail()}")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start in {START_TIMEOUT:.0f} s: {self.tail()}")

    def tail(self) -> str:
        return " | ".join(_text(self.stderr).strip().splitlines()[-5:]) or "(no stderr)"

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid)

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def memory_kib(self, key: str) -> int:
        """``VmRSS`` or ``VmHWM`` from /proc/PID/status, in KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
        return 0

    def log_levels(self) -> Counter[str]:
        """Its JSON log lines on stderr by level ("text": a line that is not JSON)."""
        levels: Counter[str] = Counter()
        for line in _text(self.stderr).splitlines():
            try:
                levels[str(json.loads(line).get("level", "?"))] += 1
            except (ValueError, AttributeError):
                levels["text"] += 1
        return levels

    def descriptors_exhausted(self) -> int:
        """Log lines that say a call failed with EMFILE: the limit was reached between samples."""
        return sum("[Errno 24]" in line for line in _text(self.stderr).splitlines())

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (every thread), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def dealer_serving(stdout: str, stderr: str) -> dict[str, Any] | None:
    """The JSON "serving" line of ``gnau serve --log-format json``, once it is written."""
    for line in stderr.splitlines():
        if '"serving"' in line:
            entry: dict[str, Any] = json.loads(line)
            if entry.get("event") == "serving":
                return entry
    return None


def witness_serving(stdout: str, stderr: str) -> dict[str, Any] | None:
    """The witness's "vkey" line on stdout, its last start-up line; with its JSON log line."""
    if "\nvkey " not in f"\n{stdout}":
        return None
    for line in stderr.splitlines():
        if '"witness_serving"' in line:
            entry: dict[str, Any] = json.loads(line)
            return entry
    return {}


async def start_dealer(directory: Path, limit: int) -> tuple[Server, dict[str, Any]]:
    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    data_dir = directory / "dealer-data"
    argv = [
        GNAU, "serve", "--listen", f"127.0.0.1:{grpc_port}", "--data-dir", str(data_dir),
        "--database", f"sqlite:///{directory / 'gnau.db'}", "--log-format", "json",
        "--reflection", "false", "--http-listen", f"127.0.0.1:{http_port}",
        "--metrics-listen", f"127.0.0.1:{metrics_port}",
    ]  # fmt: skip
    server = Server.start("gnau-serve", argv, directory, limit)
    serving = await server.wait_for(dealer_serving)
    serving["token"] = (data_dir / "operator-token").read_text(encoding="utf-8").strip()
    return server, serving


async def start_witness(directory: Path, limit: int, origin: str, vkey: str) -> tuple[Server, int]:
    key = directory / "witness.key"
    made = subprocess.run(
        [GNAU, "witness", "keygen", "--name", "witness.example/bench", "--key", str(key)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        raise RuntimeError(f"gnau witness keygen failed: {made.stderr.strip()}")
    logs = directory / "logs.toml"
    logs.write_text(
        f'prefix = ""\n\n[[log]]\norigin = {json.dumps(origin)}\nkeys = [{json.dumps(vkey)}]\n',
        encoding="utf-8",
    )
    port = free_port()
    argv = [
        GNAU, "witness", "serve", "--listen", f"127.0.0.1:{port}", "--key", str(key),
        "--logs", str(logs), "--database", f"sqlite:///{directory / 'witness.db'}",
        "--log-format", "json",
    ]  # fmt: skip
    server = Server.start("gnau-witness", argv, directory, limit)
    await server.wait_for(witness_serving)
    return server, port


# --- the measuring client -------------------------------------------------------------------------


@dataclass
class RoundIds(Recorder):
    """bench_service's recorder, keeping the id of the round its last Shuffle made."""

    round_id: str = ""

    async def call(self, rpc: int, start_call: Any) -> Any:
        response = await super().call(rpc, start_call)
        if rpc == SHUFFLE:
            self.round_id = response.round.round_id
        return response


@dataclass
class Peaks:
    """The largest descriptor count and resident memory seen for each server."""

    descriptors: dict[str, int] = field(default_factory=dict)
    rss_kib: dict[str, int] = field(default_factory=dict)

    def sample(self, servers: Sequence[Server]) -> None:
        for server in servers:
            try:
                count, rss = server.descriptors(), server.memory_kib("VmRSS")
            except OSError:
                continue
            self.descriptors[server.name] = max(self.descriptors.get(server.name, 0), count)
            self.rss_kib[server.name] = max(self.rss_kib.get(server.name, 0), rss)


@dataclass
class Phase:
    """What the measuring client saw in one phase."""

    name: str
    seconds: float = 0.0
    rounds: list[float] = field(default_factory=list)
    receipts: list[float] = field(default_factory=list)
    receipt_failures: Counter[str] = field(default_factory=Counter)
    round_errors: list[str] = field(default_factory=list)
    health_checks: int = 0
    not_serving: list[str] = field(default_factory=list)
    newcomers: Counter[str] = field(default_factory=Counter)
    dealer_cpu: float = 0.0
    witness_cpu: float = 0.0
    client_cpu: float = 0.0
    peaks: Peaks = field(default_factory=Peaks)

    @property
    def cpu_ms_per_round(self) -> float:
        return self.dealer_cpu * 1000 / len(self.rounds) if self.rounds else float("nan")


@dataclass
class Client:
    """The measuring client's connections: gRPC for rounds, another for health, HTTP."""

    grpc_target: str
    token: str
    page_port: int
    servers: Sequence[Server]

    async def run(self, phase: Phase, seconds: float) -> None:
        """Play, check and sample for ``seconds``; the phase's CPU deltas around it."""
        before = self._cpu()
        started = time.perf_counter()
        deadline = started + seconds
        async with (
            grpc.aio.insecure_channel(self.grpc_target) as rounds,
            grpc.aio.insecure_channel(self.grpc_target) as health,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session,
        ):
            last_round: list[str] = []
            await asyncio.gather(
                self._play(rounds, session, phase, deadline, last_round),
                self._check_health(health, phase, deadline),
                self._newcomers(phase, deadline, last_round),
                self._sample(phase, deadline),
            )
        phase.seconds = time.perf_counter() - started
        after = self._cpu()
        phase.dealer_cpu, phase.witness_cpu, phase.client_cpu = (
            b - a for a, b in zip(before, after, strict=True)
        )

    def _cpu(self) -> tuple[float, float, float]:
        dealer, witness = (server.cpu_seconds() for server in self.servers)
        return dealer, witness, time.process_time()

    async def _play(
        self,
        channel: grpc.aio.Channel,
        session: aiohttp.ClientSession,
        phase: Phase,
        deadline: float,
        last_round: list[str],
    ) -> None:
        play = real_player(channel, self.token, phase.name.split(":")[0].lower())
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
            last_round[:] = [recorder.round_id]
            await self._receipt(session, phase, recorder.round_id)

    async def _receipt(self, session: aiohttp.ClientSession, phase: Phase, round_id: str) -> None:
        url = f"http://127.0.0.1:{self.page_port}/rounds/{round_id}/receipt"
        started = time.perf_counter()
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
                await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            phase.receipt_failures[type(error).__name__] += 1
            return
        if status != 200:
            phase.receipt_failures[str(status)] += 1
            return
        phase.receipts.append(time.perf_counter() - started)

    async def _check_health(self, channel: grpc.aio.Channel, phase: Phase, deadline: float) -> None:
        stub = health_pb2_grpc.HealthStub(channel)
        serving = health_pb2.HealthCheckResponse.SERVING
        while time.perf_counter() < deadline:
            for service in HEALTH_SERVICES:
                phase.health_checks += 1
                request = health_pb2.HealthCheckRequest(service=service)
                try:
                    answer = await stub.Check(request, timeout=HEALTH_TIMEOUT)
                except grpc.aio.AioRpcError as error:
                    phase.not_serving.append(f"{service or '(all)'}: {error.code().name}")
                    continue
                if answer.status != serving:
                    name = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
                    phase.not_serving.append(f"{service or '(all)'}: {name}")
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _newcomers(self, phase: Phase, deadline: float, last_round: list[str]) -> None:
        """A fresh connection to the page port every 0.5 s, for the last receipt."""
        while time.perf_counter() < deadline:
            await asyncio.sleep(SAMPLE_SECONDS)
            if last_round:
                request = get_request(f"/rounds/{last_round[0]}/receipt")
                status = await answer_status(("127.0.0.1", self.page_port), request, None)
                phase.newcomers[status] += 1

    async def _sample(self, phase: Phase, deadline: float) -> None:
        while time.perf_counter() < deadline:
            phase.peaks.sample(self.servers)
            await asyncio.sleep(SAMPLE_SECONDS)


# --- raw HTTP, for the newcomers and the abuse ----------------------------------------------------


def get_request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()


def bound_socket(source: str | None) -> socket.socket:
    """A non-blocking TCP socket, bound to ``source`` (its port chosen at connect) if given."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    if source is not None:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((source, 0))
    return sock


async def connect(
    where: tuple[str, int], source: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str:
    """A connection from ``source``, or what stopped it ("connect:" and the error)."""
    sock = bound_socket(source)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await asyncio.get_running_loop().sock_connect(sock, where)
        return await asyncio.open_connection(sock=sock, limit=2**16)
    except TimeoutError:
        sock.close()
        return "connect:timeout"
    except OSError as error:
        sock.close()
        return f"connect:{os.strerror(error.errno) if error.errno else type(error).__name__}"


def status_of(line: bytes) -> str:
    """The status code of an HTTP status line; "closed" for nothing, "garbage" otherwise.

    >>> status_of(b"HTTP/1.1 503 Service Unavailable\\r\\n"), status_of(b""), status_of(b"x")
    ('503', 'closed', 'garbage')
    """
    if not line:
        return "closed"
    parts = line.split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") and parts[1].isdigit():
        return parts[1].decode()
    return "garbage"


async def read_status(reader: asyncio.StreamReader, timeout: float) -> str:
    try:
        async with asyncio.timeout(timeout):
            return status_of(await reader.readline())
    except TimeoutError:
        return "no answer"
    except (ConnectionError, ValueError):
        return "reset"


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()


async def answer_status(where: tuple[str, int], request: bytes, source: str | None) -> str:
    """Send ``request`` on a fresh connection; the status of the answer."""
    connected = await connect(where, source)
    if isinstance(connected, str):
        return connected
    reader, writer = connected
    try:
        writer.write(request)
        await writer.drain()
        return await read_status(reader, ANSWER_TIMEOUT)
    except ConnectionError:
        return "reset"
    finally:
        await close(writer)


# --- the abuse (a child process) ------------------------------------------------------------------


def malformed_requests(post_path: str) -> dict[str, bytes]:
    """One request of each malformed kind; ``post_path`` is where a body may be posted."""
    host = b"Host: 127.0.0.1\r\n"
    post = f"POST {post_path} HTTP/1.1\r\n".encode() + host
    huge = b"Content-Length: 104857600\r\n"
    return {
        "bad bytes": b"GET /\x00\x7f\xff HTTP/1.1\r\n" + host + b"\r\n",
        "long line": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + host + b"\r\n",
        "200 headers": b"GET / HTTP/1.1\r\n"
        + host
        + b"".join(b"X-H%d: v\r\n" % n for n in range(200))
        + b"\r\n",
        "bad chunks": post + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        "100 MB, no body": post + huge + b"\r\n",
        "Expect 100 MB": post + huge + b"Expect: 100-continue\r\n\r\n",
        "gzip garbage": post
        + b"Content-Encoding: gzip\r\nContent-Length: 64\r\n\r\n"
        + random.randbytes(64),
        "random bytes": random.randbytes(512),
    }


@dataclass
class Abuse:
    """The attack on one port; its answers counted by (kind, status)."""

    name: str
    where: tuple[str, int]
    settings: dict[str, Any]
    stop: asyncio.Event
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def tasks(self, block: int) -> list[asyncio.Task[None]]:
        """Every connection of the attack, started in batches; ``block``: the source /16."""
        s = self.settings
        per_source = s["per_source"]
        made = [self._idle(f"127.{block}.{1 + i // per_source}.1", i) for i in range(s["idle"])]
        spacing = (s["idle"] + s["slowloris"]) / max(s["slowloris"], 1)  # among the idle ones
        made += [
            self._slowloris(f"127.{block}.{200 + i // per_source}.1", int(i * spacing))
            for i in range(s["slowloris"])
        ]
        made += [self._flood(block, worker) for worker in range(s["flood"])]
        return [asyncio.create_task(coroutine) for coroutine in made]

    async def _ramp(self, position: int) -> None:
        s = self.settings
        await asyncio.sleep(position // s["batch"] * s["batch_seconds"])

    async def _idle(self, source: str, position: int) -> None:
        """Hold a connection and send nothing; open it again once the server closes it."""
        await self._ramp(position)
        while not self.stop.is_set():
            connected = await connect(self.where, source)
            if isinstance(connected, str):
                self.counts["idle", connected] += 1
                await self._pause()
                continue
            reader, writer = connected
            status = await self._until_stop(read_status(reader, 3600))
            await close(writer)
            if status is not None:
                self.counts["idle", status] += 1
                if status != "closed":
                    await self._pause()

    async def _slowloris(self, source: str, position: int) -> None:
        """A request line, then one header byte every ``drip`` seconds until answered."""
        await self._ramp(position)
        while not self.stop.is_set():
            connected = await connect(self.where, source)
            if isinstance(connected, str):
                self.counts["slowloris", connected] += 1
                await self._pause()
                continue
            reader, writer = connected
            drip = asyncio.create_task(self._drip(writer))
            status = await self._until_stop(read_status(reader, 3600))
            drip.cancel()
            await close(writer)
            if status is not None:
                self.counts["slowloris", status] += 1
                if status != "408":
                    await self._pause()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            while True:
                await asyncio.sleep(self.settings["drip"])
                writer.write(b"a")
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    async def _flood(self, block: int, worker: int) -> None:
        """Malformed requests one after another, each on a fresh connection."""
        kinds = list(malformed_requests(self.settings["post_path"]).items())
        n = worker
        while not self.stop.is_set():
            kind, request = kinds[n % len(kinds)]
            if kind == "random bytes":
                request = random.randbytes(512)
            source = f"127.{block}.{100 + n % 50}.{1 + worker}"
            status = await self._until_stop(answer_status(self.where, request, source))
            if status is not None:
                self.counts[kind, status] += 1
            n += 1

    async def _until_stop(self, waiting: Any) -> str | None:
        """The coroutine's result, or None once the abuse stops."""
        task = asyncio.ensure_future(waiting)
        stopping = asyncio.ensure_future(self.stop.wait())
        await asyncio.wait((task, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if task.done():
            result: str = task.result()
            return result
        task.cancel()
        return None

    async def _pause(self) -> None:
        retry = self.settings["retry"]
        try:
            async with asyncio.timeout(random.uniform(retry / 2, retry * 1.5)):
                await self.stop.wait()
        except TimeoutError:
            pass


async def abuse(settings: dict[str, Any]) -> dict[str, Any]:
    """Attack every port until SIGTERM; the counts by port, kind and status."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    attacks = [
        Abuse(name, ("127.0.0.1", port), {**settings, "post_path": path}, stop)
        for name, port, path in settings["ports"]
    ]
    tasks = [task for block, attack in enumerate(attacks, 1) for task in attack.tasks(block)]
    print(json.dumps({"started": True, "descriptors": hard}), flush=True)
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        attack.name: [[kind, status, count] for (kind, status), count in attack.counts.items()]
        for attack in attacks
    }


def run_abuse(encoded: str) -> None:
    result = asyncio.run(abuse(json.loads(encoded)))
    result["cpu_seconds"] = time.process_time()
    print(json.dumps(result), flush=True)


def start_abuse(arguments: argparse.Namespace, ports: Sequence[int]) -> subprocess.Popen[str]:
    settings = {
        "ports": [
            [name, port, WITNESS_POST if name == "witness" else "/"]
            for name, port in zip(PORT_NAMES, ports, strict=True)
        ],
        "idle": arguments.idle,
        "slowloris": arguments.slowloris,
        "flood": arguments.flood,
        "per_source": arguments.per_source,
        "drip": arguments.drip,
        "retry": arguments.retry,
        "batch": 100,
        "batch_seconds": 0.05,
    }
    niceness = arguments.abuse_nice
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--abuse", json.dumps(settings)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.nice(niceness),  # noqa: PLW1509  (before the child starts threads)
    )
    assert child.stdout is not None
    started = child.stdout.readline()
    if not started or not json.loads(started).get("started"):
        child.kill()
        raise RuntimeError(f"the abuse process did not start: {started!r}")
    return child


def stop_abuse(child: subprocess.Popen[str]) -> dict[str, Any]:
    child.send_signal(signal.SIGTERM)
    output, _ = child.communicate(timeout=60)
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


# --- reporting ------------------------------------------------------------------------------------


def percentile_ms(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank] * 1000


def spread(values: Sequence[float]) -> str:
    return f"{percentile_ms(values, 0.5):.1f} / {percentile_ms(values, 0.99):.1f}"


def counted(counts: Counter[str]) -> str:
    return ", ".join(f"{key} {n:,}" for key, n in sorted(counts.items())) or "none"


def phase_table(phases: Sequence[Phase]) -> list[str]:
    lines = [
        "| phase | s | rounds | round p50 / p99 ms | receipt p50 / p99 ms | receipts failed | "
        "round errors | health checks / not SERVING | newcomer connections | "
        "dealer CPU ms/round | witness CPU s | client CPU s |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|",
    ]
    for p in phases:
        lines.append(
            f"| {p.name} | {p.seconds:.1f} | {len(p.rounds):,} | {spread(p.rounds)} | "
            f"{spread(p.receipts)} | {counted(p.receipt_failures)} | {len(p.round_errors)} | "
            f"{p.health_checks} / {len(p.not_serving)} | {counted(p.newcomers)} | "
            f"{p.cpu_ms_per_round:.1f} | {p.witness_cpu:.2f} | {p.client_cpu:.2f} |"
        )
    return lines


def abuse_table(result: dict[str, Any]) -> list[str]:
    lines = ["| port | kind | answers by status |", "|---|---|---|"]
    for port in PORT_NAMES:
        by_kind: dict[str, Counter[str]] = {}
        for kind, status, count in result.get(port, []):
            by_kind.setdefault(kind, Counter())[status] += count
        for kind, counts in sorted(by_kind.items()):
            lines.append(f"| {port} | {kind} | {counted(counts)} |")
        total: Counter[str] = sum(by_kind.values(), Counter())
        lines.append(f"| {port} | **all** | {counted(total)} |")
    return lines


def resource_table(peaks: Peaks, servers: Sequence[Server], hwm: dict[str, int]) -> list[str]:
    lines = [
        "| server | peak descriptors (sampled) | EMFILE errors logged | peak RSS MiB (sampled) "
        "| VmHWM MiB | log lines by level |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for server in servers:
        lines.append(
            f"| {server.name} | {peaks.descriptors.get(server.name, 0):,} "
            f"| {server.descriptors_exhausted():,} "
            f"| {peaks.rss_kib.get(server.name, 0) / 1024:.1f} | {hwm[server.name] / 1024:.1f} "
            f"| {counted(server.log_levels())} |"
        )
    return lines


def verdicts(clean: Phase, attacked: Phase) -> list[str]:
    """Why the run fails, if it does."""
    problems = []
    for label, a, b in (
        ("round", clean.rounds, attacked.rounds),
        ("receipt", clean.receipts, attacked.receipts),
    ):
        ratio = percentile_ms(b, 0.5) / percentile_ms(a, 0.5) if a and b else float("inf")
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        print(f"  median {label} latency B/A = {ratio:.2f}: {verdict} the target of <= 2x")
        if not ratio <= TARGET_RATIO:
            problems.append(f"the median {label} latency under abuse is {ratio:.2f}x the clean one")
    for phase in (clean, attacked):
        if phase.not_serving:
            problems.append(
                f"{phase.name}: health not SERVING {len(phase.not_serving)} times "
                f"(first: {phase.not_serving[0]})"
            )
        if phase.round_errors:
            problems.append(f"{phase.name}: {len(phase.round_errors)} rounds failed")
        if phase.receipt_failures:
            problems.append(f"{phase.name}: receipts failed: {counted(phase.receipt_failures)}")
    return problems


def as_json(phases: Sequence[Phase], abused: dict[str, Any], hwm: dict[str, int]) -> Any:
    return {
        "phases": [
            {
                "name": p.name,
                "seconds": p.seconds,
                "rounds": len(p.rounds),
                "round_ms": [percentile_ms(p.rounds, 0.5), percentile_ms(p.rounds, 0.99)],
                "receipt_ms": [percentile_ms(p.receipts, 0.5), percentile_ms(p.receipts, 0.99)],
                "receipt_failures": dict(p.receipt_failures),
                "round_errors": p.round_errors[:10],
                "health_checks": p.health_checks,
                "not_serving": p.not_serving[:10],
                "newcomers": dict(p.newcomers),
                "dealer_cpu_ms_per_round": p.cpu_ms_per_round,
                "witness_cpu_seconds": p.witness_cpu,
                "client_cpu_seconds": p.client_cpu,
                "peak_descriptors": p.peaks.descriptors,
                "peak_rss_kib": p.peaks.rss_kib,
            }
            for p in phases
        ],
        "abuse": abused,
        "vm_hwm_kib": hwm,
    }


# --- main -----------------------------------------------------------------------------------------


async def run_benchmark(arguments: argparse.Namespace) -> int:
    print(
        f"Gnau HTTP edge benchmark: {arguments.idle:,} idle + {arguments.slowloris:,} slowloris "
        f"connections and {arguments.flood} flood workers on each of 3 HTTP ports; servers "
        f"under RLIMIT_NOFILE {arguments.descriptors}; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    with tempfile.TemporaryDirectory(prefix="gnau-bench-edge-") as temp:
        directory = Path(temp)
        dealer, serving = await start_dealer(directory, arguments.descriptors)
        servers = [dealer]
        try:
            witness, witness_port = await start_witness(
                directory, arguments.descriptors, serving["origin"], serving["key"]
            )
            servers.append(witness)
            print(
                f"  gnau serve: {serving.get('descriptors')} descriptors, "
                f"{serving.get('http_connections_per_port')} connections per HTTP port; "
                f"gnau witness serve on {witness_port}"
            )
            return await measure(arguments, servers, serving, witness_port)
        finally:
            for server in servers:
                status = server.stop()
                if status != 0:
                    print(f"  {server.name} exited {status}: {server.tail()}")


async def measure(
    arguments: argparse.Namespace,
    servers: Sequence[Server],
    serving: dict[str, Any],
    witness_port: int,
) -> int:
    client = Client(f"127.0.0.1:{serving['port']}", serving["token"], serving["http_port"], servers)
    clean, attacked = Phase("A: no abuse"), Phase("B: abuse")
    print(f"\nA. {arguments.seconds_clean:g} s of rounds and receipts, no abuse")
    await client.run(clean, arguments.seconds_clean)
    print(f"B. {arguments.seconds_abuse:g} s of the same under abuse (separate process)")
    ports = (serving["http_port"], serving["metrics_port"], witness_port)
    child = start_abuse(arguments, ports)
    try:
        await client.run(attacked, arguments.seconds_abuse)
    finally:
        abused = stop_abuse(child)
    hwm = {server.name: server.memory_kib("VmHWM") for server in servers}
    peaks = Peaks()
    for phase in (clean, attacked):
        for name, count in phase.peaks.descriptors.items():
            peaks.descriptors[name] = max(peaks.descriptors.get(name, 0), count)
        for name, rss in phase.peaks.rss_kib.items():
            peaks.rss_kib[name] = max(peaks.rss_kib.get(name, 0), rss)
    print("\n" + "\n".join(phase_table((clean, attacked))))
    print(
        f"\nAbuse answers (abuse process at nice {arguments.abuse_nice}, "
        f"CPU: {abused.pop('cpu_seconds'):.1f} s)\n"
    )
    print("\n".join(abuse_table(abused)))
    print(f"\nPeaks over both phases (limit {arguments.descriptors} descriptors each)\n")
    print("\n".join(resource_table(peaks, servers, hwm)))
    for server in servers:
        if server.descriptors_exhausted():
            print(
                f"  NOTE: {server.name} reached its descriptor limit between samples "
                f"({server.descriptors_exhausted()} EMFILE errors logged)"
            )
        errors = [line for line in _text(server.stderr).splitlines() if '"error"' in line]
        for line in errors[:3]:
            print(f"  {server.name} logged: {line[:300]}")
    for phase in (clean, attacked):
        for line in sorted(set(phase.not_serving))[:5] + phase.round_errors[:3]:
            print(f"  {phase.name}: {line}")
    print()
    problems = verdicts(clean, attacked)
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(as_json((clean, attacked), abused, hwm), indent=2))
    for problem in problems:
        print(f"  FAIL: {problem}")
    if not problems:
        print("  PASS: health SERVING throughout, medians within 2x under abuse")
    return 1 if problems else 0


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    add = parser.add_argument
    add("--idle", type=int, default=2000, help="idle connections per port (2000)")
    add("--slowloris", type=int, default=300, help="slowloris connections per port (300)")
    add("--flood", type=int, default=4, help="malformed-request workers per port (4)")
    add("--per-source", type=int, default=100, help="abuse connections per source address (100)")
    add("--drip", type=float, default=3.0, help="seconds between slowloris bytes (3)")
    add("--retry", type=float, default=5.0, help="mean seconds before a refused one retries (5)")
    add("--seconds-clean", type=float, default=15.0, help="phase A seconds (15)")
    add("--seconds-abuse", type=float, default=20.0, help="phase B seconds (20)")
    add("--descriptors", type=int, default=1024, help="the servers' RLIMIT_NOFILE (1024)")
    add("--abuse-nice", type=int, default=19, help="the abuse process's niceness (19)")
    add("--json", type=Path, help="also write the figures here")
    add("--abuse", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    if arguments.abuse is not None:
        run_abuse(arguments.abuse)
        return
    sys.exit(asyncio.run(run_benchmark(arguments)))


if __name__ == "__main__":
    main()
