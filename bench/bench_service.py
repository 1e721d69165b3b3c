"""The dealer service end to end over gRPC, beside a bare gRPC service measured in the same run.

Run: ``.venv/bin/python bench/bench_service.py`` (about a minute and a half with the defaults;
with ``--workers 1,2``, below, under four minutes).

1. The real service (``gnau serve``) runs in its own process on a fresh SQLite file, then on a
   scratch PostgreSQL database (skipped, with the reason, if PostgreSQL is unreachable). Every
   change is a signed log entry, durable (group commit) before its call returns.
2. A load generator, on its own ``grpc.aio`` channels and the generated stubs, runs ``--tables``
   tasks at once, each playing whole rounds on its own table: Shuffle, Deal (three seats),
   Reveal, Settle. It runs in ``--load-processes`` processes of its own (by default half the
   machine's cores, at most 8: so one, in this process, on 2 cores), table ``t`` in process
   ``t mod P``, so that the load is not what limits a server on many cores; their latencies and
   rounds are added together, and their CPU is the load generator's. After ``--warmup``
   seconds it measures for ``--seconds``: rounds completed per second and the p50/p99 latency
   of each of the four calls. Then every task finishes the round it is in, so every round in
   the log is settled.
3. The baseline: a bare ``grpc.aio`` server in its own process (this file, ``--bare-server``),
   four unary methods with raw-bytes generic handlers and no interceptor, answering each call
   with a payload of the size of the real service's response (and sent requests of the size of
   the real requests, with the same ``authorization`` header), measured in the same run, by
   the same loop, at the same concurrency and for the same time.
4. After each real run the log is exported and verified offline (``gnau audit export`` and
   ``gnau audit verify --key <the log key>``): it must be VALID, and every round played settled.
5. Where the time goes: ``gnau serve`` once more (this file, ``--front-server``) with the
   dealer's four steps answered from memory, so nothing is stored, signed or dealt: everything
   else (interceptor, tokens, request ids, logs, idempotency fingerprints, protobuf conversion)
   runs as in the real service. It bounds what any store could reach in one process.
6. The other half: the dealer and the store alone, no gRPC (this file, ``--dealer-alone``, in a
   child process): the same tables, seats and four steps, on a fresh SQLite file and a scratch
   PostgreSQL database.
7. What the actor each entry names costs (issue 37): the bytes it adds to an entry, and the
   CPU of encoding, signing and hashing a round's four entries with it against without,
   interleaved in this run.

The machine is shared and noisy, so compare the ratios, not absolute figures across runs. The
last thing printed is a markdown block for the README.

Workers (issue 26): ``--workers 1,2`` runs steps 1 to 4 once per count: the real service as
``gnau serve --workers N`` (a supervisor and N worker processes sharing the port with
``SO_REUSEPORT`` and one database), and the bare service as N processes on one port (also
``SO_REUSEPORT``). The server's CPU is that of the supervisor and all its children (or of every
bare process), read from ``/proc`` at both ends of the window; a process set that changes in the
window (a worker restarted) is reported. The kernel spreads *connections*, not calls, over the
processes, so the load generator opens ``--channels`` connections (by default one per table
with workers, as many clients would; 1 otherwise, as before), table ``t`` on connection
``t mod channels``, the same for every count. Each server is then driven open-loop at a fixed
offered load (``--rate`` rounds/s; by default ``--fixed-load`` 0.8 of the first count's
closed-loop rate, the same for every count): a round starts every 1/rate s on a free table,
whatever the others are doing, so each call's p99 compares the counts at the same offered load.
Then a second markdown table: rounds/s against the first count, the ceiling the run's own CPU
figures allow (the load generator shares the cores: at most ``min(cores / (S + C), N / S)``
rounds per ms, S and C the server's and the load generator's CPU ms per round with the first
count), the share of it reached, the CPU per round, and the latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Final

import grpc
import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import dealer_pb2, dealer_pb2_grpc, round_pb2, types_pb2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnau_service.audit.entries import EntryKind, encode_entry
from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.round_events import (
    committed_payload,
    dealt_payload,
    revealed_payload,
    settle_round,
    settled_payload,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.audit.software import software_identity
from gnau_service.cli.main import main as gnau_main
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rounds.catalogue import Catalogue, TableConfig
from gnau_service.rounds.dealer import Dealer, Idempotency
from gnau_service.rounds.record import RoundRecord, RoundState
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import view_of
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.server.process.tokens import new_token
from gnau_service.store import open_store
from gnau_service.store.transaction import utc_now
from tests.serving import Served, served

RPCS: Final = ("Shuffle", "Deal", "Reveal", "Settle")
SHUFFLE, DEAL, REVEAL, SETTLE = range(4)
SEATS: Final = 3
CALL_TIMEOUT: Final = 30.0
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 20.0
SIZE_ROUNDS: Final = 5
TARGET_RATIO: Final = 0.5
FRONT_ONLY: Final = "gRPC side only"
BARE_SERVICE: Final = "bench.v1.BareService"
DEFAULT_POSTGRES_URL: Final = "postgresql://postgres@127.0.0.1:5432/postgres"
GNAU: Final = str(Path(sys.executable).parent / "gnau")
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
# --workers (issue 26)
FIXED_LOAD: Final = 0.8  # the fixed offered load: this share of the first count's rate
POOL_PER_TABLE: Final = 4  # the open loop's tables: this many per --tables
SPEEDUP_TARGET: Final = 1.3
CEILING_SHARE_TARGET: Final = 0.9
CPU_GROWTH_TARGET: Final = 0.10
#: The load's processes: half the cores, so that the server has the other half, at most 8.
DEFAULT_LOAD_PROCESSES: Final = max(1, min(8, (os.cpu_count() or 1) // 2))
BUSY_BEFORE: Final = 0.3  # cores busy on the machine before the start: warn above this


# --- processes ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (every thread)."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (a supervisor's workers), from its threads' ``children``
    files, or by scanning ``/proc`` for its ppid where the kernel has no such file."""
    tasks = Path(f"/proc/{pid}/task")
    children: set[int] = set()
    try:
        files = [task / "children" for task in tasks.iterdir()]
    except OSError:
        return []
    if files and files[0].exists():
        for path in files:
            with contextlib.suppress(OSError):
                children.update(int(child) for child in path.read_text(encoding="ascii").split())
        return sorted(children)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text(encoding="ascii")
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    children.add(int(entry.name))
    return sorted(children)


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent outside idle and iowait so far (``/proc/stat``)."""
    values = [
        int(v) for v in Path("/proc/stat").read_text(encoding="ascii").split("\n")[0].split()[1:]
    ]
    return (sum(values[:8]) - values[3] - values[4]) / CLOCK_TICKS


def connections_by_pid(pids: Sequence[int], port: int) -> dict[int, int]:
    """Established TCP connections on local ``port`` that each of ``pids`` holds: how the
    kernel spread the load generator's connections over the processes sharing the port."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text(encoding="ascii").splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    counts = {}
    for pid in pids:
        counts[pid] = 0
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    counts[pid] += link.startswith("socket:[") and link[8:-1] in inodes
    return counts


def tree_cpu_by_pid(pid: int) -> dict[int, float]:
    """CPU seconds so far of process ``pid`` and of each of its children (a supervisor's
    workers), by pid."""
    cpu = {}
    for member in [pid, *child_pids(pid)]:
        with contextlib.suppress(OSError):  # gone since listed
            cpu[member] = process_cpu_seconds(member)
    return cpu


@dataclass(frozen=True)
class ServedServer:
    """A ``gnau serve`` of :func:`tests.serving.served` (the tests' way of running one), as
    :func:`drive` measures it: the CPU of its process and its children, and its port."""

    served: Served

    @property
    def port(self) -> int:
        return int(self.served.target.rsplit(":", 1)[1])

    def cpu_by_pid(self) -> dict[int, float]:
        return tree_cpu_by_pid(self.served.process.pid)

    def cpu_seconds(self) -> float:
        return sum(self.cpu_by_pid().values())


class ServerProcess:
    """A server in a child process, its stdout and stderr in files under ``directory``.
    ``workers``: a ``gnau serve --workers N`` supervisor, which serves once it says so for all
    N workers."""

    def __init__(self, name: str, argv: Sequence[str], directory: Path, workers: int = 1) -> None:
        self.name = name
        self.argv = list(argv)
        self.workers = workers
        self.port = 0  # where it serves, if known: its connections are counted by process
        self.stdout_path = directory / f"{name}.stdout"
        self.stderr_path = directory / f"{name}.stderr"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> str:
        """Start it and wait until it serves: a "serving on" line on stdout, or a JSON
        "serving" line on stderr (``gnau serve --log-format json``; with workers, the
        supervisor's, which names them). Returns the log key the JSON lines name ("" for a
        server that has none)."""
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=err)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            stdout = self.stdout_path.read_text(encoding="utf-8", errors="replace")
            if self.workers == 1 and "serving on" in stdout:
                return ""
            key = ""
            for line in self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
                if '"serving"' not in line:
                    continue
                record = json.loads(line)
                if record.get("event") != "serving":
                    continue
                key = key or str(record.get("key", ""))
                if self.workers == 1 or "workers" in record:
                    return key
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with status {self.process.returncode}: {self.tail()}"
                )
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start in {START_TIMEOUT:.0f} s: {self.tail()}")

    def tail(self) -> str:
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace").strip()
        return " | ".join(text.splitlines()[-5:]) or "(no stderr)"

    def cpu_by_pid(self) -> dict[int, float]:
        assert self.process is not None
        return tree_cpu_by_pid(self.process.pid)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process and its children so far (every thread)."""
        return sum(self.cpu_by_pid().values())

    def stop(self) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it has not exited in time."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"  {self.name} ignored SIGTERM for {STOP_TIMEOUT:.0f} s; killing it")
            self.process.kill()
            return self.process.wait()


class ServerGroup:
    """Several server processes measured as one (the bare service's N processes on one port)."""

    def __init__(self, processes: Sequence[ServerProcess]) -> None:
        self.processes = list(processes)
        self.workers = len(self.processes)
        self.port = 0

    async def start(self) -> str:
        keys = await asyncio.gather(*(process.start() for process in self.processes))
        return keys[0]

    def tail(self) -> str:
        return " / ".join(process.tail() for process in self.processes)

    def cpu_by_pid(self) -> dict[int, float]:
        return {pid: cpu for process in self.processes for pid, cpu in process.cpu_by_pid().items()}

    def cpu_seconds(self) -> float:
        return sum(self.cpu_by_pid().values())

    def stop(self) -> int | None:
        statuses = [process.stop() for process in self.processes]
        return next((status for status in statuses if status not in (0, None)), statuses[0])


# --- the load generator ---------------------------------------------------------------------------


@dataclass
class Recorder:
    """Latencies of the calls made wholly inside the window, and the rounds finished in it."""

    window_start: float = float("inf")
    window_end: float = float("inf")
    latencies: list[list[float]] = field(default_factory=lambda: [[] for _ in RPCS])
    sizes: list[list[tuple[int, int]]] | None = None
    rounds_in_window: int = 0
    rounds_played: int = 0
    errors: list[str] = field(default_factory=list)

    async def call(self, rpc: int, start_call: Callable[[], Awaitable[Any]]) -> Any:
        started = time.perf_counter()
        response = await start_call()
        ended = time.perf_counter()
        if started >= self.window_start and ended <= self.window_end:
            self.latencies[rpc].append(ended - started)
        if self.sizes is not None:
            request = start_call.args[0]  # type: ignore[attr-defined]  # a partial
            self.sizes[rpc].append((_size(request), _size(response)))
        return response


def _size(message: Any) -> int:
    return len(message) if isinstance(message, bytes) else int(message.ByteSize())


RoundPlayer = Callable[[int, Recorder], Awaitable[None]]


#: What every benchmark table deals under: the default house rules, stakes a round uses.
BENCH_TABLE: Final = dealer_pb2.TableConfig(
    currency="EUR",
    rule_sets=[types_pb2.HouseRules()],
    min_stake=1,
    max_stake=1_000_000,
    max_seats=82,
    enabled=True,
)


def request_id() -> str:
    return str(uuid.uuid4())


def real_player(channel: grpc.aio.Channel, token: str, tag: str) -> RoundPlayer:
    """One round of the real service on table ``bench-<tag>-<n>``: four calls, each awaited."""
    stub = dealer_pb2_grpc.DealerServiceStub(channel)
    options: dict[str, Any] = {
        "metadata": (("authorization", f"Bearer {token}"),),
        "timeout": CALL_TIMEOUT,
    }

    catalogued: set[int] = set()

    async def play(table: int, recorder: Recorder) -> None:
        table_id = f"bench-{tag}-{table}"
        if table not in catalogued:  # once a table, as a platform opens its tables
            put = dealer_pb2.PutTableRequest(table_id=table_id, config=BENCH_TABLE)
            await stub.PutTable(put, **options)
            catalogued.add(table)
        shuffle = dealer_pb2.ShuffleRequest(request_id=request_id(), table_id=table_id)
        response = await recorder.call(SHUFFLE, partial(stub.Shuffle, shuffle, **options))
        round_id = response.round.round_id
        seats = [
            round_pb2.Seat(
                seat_number=n, player_id=f"player-{n}", stake=100 * n, client_seed=os.urandom(16)
            )
            for n in range(1, SEATS + 1)
        ]
        deal = dealer_pb2.DealRequest(request_id=request_id(), round_id=round_id, seats=seats)
        await recorder.call(DEAL, partial(stub.Deal, deal, **options))
        reveal = dealer_pb2.RevealRequest(request_id=request_id(), round_id=round_id)
        await recorder.call(REVEAL, partial(stub.Reveal, reveal, **options))
        settle = dealer_pb2.SettleRequest(request_id=request_id(), round_id=round_id)
        response = await recorder.call(SETTLE, partial(stub.Settle, settle, **options))
        if response.round.state != round_pb2.ROUND_STATE_SETTLED:
            raise RuntimeError(f"round {round_id} is {response.round.state} after Settle")

    return play


def bare_player(channel: grpc.aio.Channel, token: str, request_sizes: Sequence[int]) -> RoundPlayer:
    """One "round" of the bare service: four raw-bytes calls with the real requests' sizes."""
    calls: list[grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]] = [
        channel.unary_unary(f"/{BARE_SERVICE}/{name}") for name in RPCS
    ]  # bytes in and out
    payloads = [secrets.token_bytes(size) for size in request_sizes]
    options: dict[str, Any] = {
        "metadata": (("authorization", f"Bearer {token}"),),
        "timeout": CALL_TIMEOUT,
    }

    async def play(table: int, recorder: Recorder) -> None:
        for rpc, call in enumerate(calls):
            await recorder.call(rpc, partial(call, payloads[rpc], **options))

    return play


def open_channels(target: str, count: int) -> list[grpc.aio.Channel]:
    """``count`` channels to ``target``, each on its own connection: a local subchannel pool,
    so that they share none; the kernel's ``SO_REUSEPORT`` spreads connections, not calls, over
    the processes serving the port."""
    options = [("grpc.use_local_subchannel_pool", 1)] if count > 1 else []
    return [grpc.aio.insecure_channel(target, options=options) for _ in range(count)]


async def close_channels(channels: Sequence[grpc.aio.Channel]) -> None:
    await asyncio.gather(*(channel.close() for channel in channels))


def spread(players: Sequence[RoundPlayer]) -> RoundPlayer:
    """Table ``t`` plays on ``players[t mod len(players)]`` (one per channel)."""

    async def play(table: int, recorder: Recorder) -> None:
        await players[table % len(players)](table, recorder)

    return play


@dataclass
class RunResult:
    label: str
    tables: int
    seconds: float
    rounds_in_window: int
    rounds_played: int
    latencies: list[list[float]]
    errors: list[str]
    server_cpu: float  # cores busy in the window
    client_cpu: float
    machine_cpu: float = 0.0  # the whole machine's busy cores in the window
    process_cpu: dict[int, float] = field(default_factory=dict)  # the server's, by pid (cores)
    processes_changed: str = ""  # the server's process set changed in the window: how
    offered: float = 0.0  # open loop: the rounds/s offered (0: closed loop, --tables at once)
    offered_in_window: int = 0
    shed: int = 0  # open loop: rounds due in the window when no table was free
    connections: dict[int, int] = field(default_factory=dict)  # by pid, at the window's start

    @property
    def rounds_per_second(self) -> float:
        return self.rounds_in_window / self.seconds

    def ms_per_round(self, cores: float) -> float:
        return cores * 1000 / self.rounds_per_second if self.rounds_in_window else 0.0

    @property
    def client_ms_per_round(self) -> float:
        return self.ms_per_round(self.client_cpu)

    @property
    def machine_ms_per_round(self) -> float:
        return self.ms_per_round(self.machine_cpu)

    @property
    def other_cpu(self) -> float:
        """Cores busy on the machine outside the server and the load generator (PostgreSQL's
        processes, the kernel's threads, anything else running)."""
        return max(0.0, self.machine_cpu - self.server_cpu - self.client_cpu)

    @property
    def server_ms_per_round(self) -> float:
        """Server CPU time per round: steadier than the rates when the machine is shared."""
        return self.server_cpu * 1000 / self.rounds_per_second if self.rounds_in_window else 0.0

    def percentile_ms(self, rpc: int, fraction: float) -> float:
        values = sorted(self.latencies[rpc])
        if not values:
            return float("nan")
        rank = max(0, min(len(values) - 1, int(fraction * len(values) + 0.5) - 1))
        return values[rank] * 1000


@dataclass(frozen=True)
class Load:
    """What the load generator plays, as a child process of its own rebuilds it: the real
    service's rounds (``kind`` "real", tables ``bench-<tag>-<n>``) or the bare service's four
    calls with ``request_sizes``, on ``channels`` connections to ``target``."""

    kind: str
    target: str
    token: str
    tag: str
    channels: int
    request_sizes: tuple[int, ...] = ()

    def player(self, channels: Sequence[grpc.aio.Channel]) -> RoundPlayer:
        """The load's rounds on ``channels``, table ``t`` on channel ``t mod len(channels)``."""
        if self.kind == "real":
            players = [real_player(channel, self.token, self.tag) for channel in channels]
        else:
            players = [bare_player(channel, self.token, self.request_sizes) for channel in channels]
        return spread(players)

    def open(self) -> tuple[RoundPlayer, list[grpc.aio.Channel]]:
        """The load on ``channels`` connections of its own (a load process's)."""
        channels = open_channels(self.target, self.channels)
        return self.player(channels), channels


async def play_tables(
    play: RoundPlayer,
    recorder: Recorder,
    tables: Sequence[int],
    rate: float | None,
    every_table: int | None = None,
) -> tuple[int, int]:
    """Closed loop: each of ``tables`` plays rounds until the window ends, then finishes its
    round. ``rate``: open loop instead, a round started every ``1 / rate`` s on a free table of
    ``POOL_PER_TABLE`` per table given (table ``t`` and ``t + k * every_table``, so that the
    pools of processes sharing ``every_table`` tables stay apart; a round due when none is free
    is shed and counted). The rounds offered and shed in the window (open loop; else 0, 0)."""

    async def play_one(table: int) -> bool:
        """One round on ``table``; False if it failed (the table is then left alone)."""
        try:
            await play(table, recorder)
        except (grpc.aio.AioRpcError, RuntimeError) as error:
            detail = (
                f"{error.code().name}: {error.details()}"
                if isinstance(error, grpc.aio.AioRpcError)
                else str(error)
            )
            recorder.errors.append(f"table {table}: {detail}")
            return False  # its round may be left open: the verification will say so
        recorder.rounds_played += 1
        if recorder.window_start <= time.perf_counter() <= recorder.window_end:
            recorder.rounds_in_window += 1
        return True

    async def table_loop(table: int) -> None:
        while time.perf_counter() < recorder.window_end:
            if not await play_one(table):
                return

    if rate is None:
        await asyncio.gather(*(table_loop(table) for table in tables))
        return 0, 0
    stride = every_table or len(tables)
    free = collections.deque(  # in turn: every channel
        table + stride * k for k in range(POOL_PER_TABLE) for table in tables
    )
    running: set[asyncio.Task[None]] = set()
    offered = shed = 0

    async def one(table: int) -> None:
        if await play_one(table):
            free.append(table)

    due = time.perf_counter()
    while due < recorder.window_end:
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        in_window = recorder.window_start <= due
        offered += in_window
        if free:
            task = asyncio.create_task(one(free.popleft()))
            running.add(task)
            task.add_done_callback(running.discard)
        else:
            shed += in_window
        due += 1 / rate
    await asyncio.gather(*running)
    return offered, shed


async def load_child(order: dict[str, Any]) -> dict[str, Any]:
    """A load process (``--load-child``): its share of the tables, in the parent's window
    (``time.perf_counter`` is the machine's monotonic clock, the same in every process); what
    it recorded, and its own CPU in the window."""
    recorder = Recorder(window_start=order["window_start"], window_end=order["window_end"])
    play, channels = Load(**order["load"]).open()
    cpu: list[float] = []

    async def measure() -> None:
        await asyncio.sleep(max(0.0, recorder.window_start - time.perf_counter()))
        cpu.append(time.process_time())
        await asyncio.sleep(max(0.0, recorder.window_end - time.perf_counter()))
        cpu.append(time.process_time())

    measuring = asyncio.create_task(measure())
    try:
        offered, shed = await play_tables(
            play, recorder, order["tables"], order["rate"], order["every_table"]
        )
    finally:
        await close_channels(channels)
    await measuring
    return {
        "latencies": recorder.latencies,
        "rounds_in_window": recorder.rounds_in_window,
        "rounds_played": recorder.rounds_played,
        "errors": recorder.errors,
        "offered": offered,
        "shed": shed,
        "cpu": cpu[1] - cpu[0],
    }


async def play_in_processes(
    load: Load, recorder: Recorder, tables: int, rate: float | None, processes: int
) -> tuple[int, int, float]:
    """The load in ``processes`` child processes, table ``t`` in process ``t mod processes``,
    each on its own connections; their records added into ``recorder``. The rounds offered and
    shed, and the load processes' CPU (cores) in the window."""
    script = str(Path(__file__).resolve())

    async def child(k: int) -> dict[str, Any]:
        order = {
            "load": vars(load) | {"channels": max(1, load.channels // processes)},
            "tables": list(range(k, tables, processes)),
            "window_start": recorder.window_start,
            "window_end": recorder.window_end,
            "rate": None if rate is None else rate / processes,
            "every_table": tables,
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            script,
            "--load-child",
            json.dumps(order),
            stdout=subprocess.PIPE,
        )
        output, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"load process {k} exited with status {process.returncode}")
        result: dict[str, Any] = json.loads(output)
        return result

    results = await asyncio.gather(*(child(k) for k in range(min(processes, tables))))
    offered = shed = 0
    cpu = 0.0
    for result in results:
        for rpc, values in enumerate(result["latencies"]):
            recorder.latencies[rpc].extend(values)
        recorder.rounds_in_window += result["rounds_in_window"]
        recorder.rounds_played += result["rounds_played"]
        recorder.errors.extend(result["errors"])
        offered += result["offered"]
        shed += result["shed"]
        cpu += result["cpu"]
    return offered, shed, cpu


async def drive(
    label: str,
    play: RoundPlayer,
    server: ServedServer | ServerProcess | ServerGroup,
    *,
    tables: int,
    warmup: float,
    seconds: float,
    rate: float | None = None,
    load: Load | None = None,
    processes: int = 1,
) -> RunResult:
    """Closed loop: ``tables`` tasks play rounds for ``warmup + seconds``; then each finishes its
    round. ``rate``: open loop instead (:func:`play_tables`). With ``load`` and more than one of
    ``processes``: the load runs in that many processes of its own (:func:`play_in_processes`),
    not with ``play`` in this one, so that it is never what limits the server."""
    recorder = Recorder()
    now = time.perf_counter()
    recorder.window_start = now + warmup
    recorder.window_end = recorder.window_start + seconds
    in_processes = load is not None and processes > 1

    def snapshot() -> tuple[float, float, float, dict[int, float]]:
        by_pid: dict[int, float] = (
            server.cpu_by_pid() if hasattr(server, "cpu_by_pid") else {}  # not bench_replicas'
        )
        total = sum(by_pid.values()) if by_pid else server.cpu_seconds()
        return total, time.process_time(), machine_busy_seconds(), by_pid

    connections: dict[int, int] = {}

    async def measure_cpu() -> tuple[float, float, float, dict[int, float], str]:
        await asyncio.sleep(max(0.0, recorder.window_start - time.perf_counter()))
        server_before, client_before, machine_before, pids_before = snapshot()
        if getattr(server, "port", 0):
            connections.update(connections_by_pid(list(pids_before), server.port))
        await asyncio.sleep(max(0.0, recorder.window_end - time.perf_counter()))
        server_after, client_after, machine_after, pids_after = snapshot()
        changed = (
            f"processes {sorted(pids_before)} at the start, {sorted(pids_after)} at the end"
            if set(pids_before) != set(pids_after)
            else ""
        )
        by_pid = {
            pid: (cpu - pids_before.get(pid, 0.0)) / seconds for pid, cpu in pids_after.items()
        }
        return (
            (server_after - server_before) / seconds,
            (client_after - client_before) / seconds,
            (machine_after - machine_before) / seconds,
            by_pid,
            changed,
        )

    cpu = asyncio.create_task(measure_cpu())
    load_cpu = 0.0
    if in_processes:
        assert load is not None
        offered, shed, load_cpu = await play_in_processes(load, recorder, tables, rate, processes)
    else:
        offered, shed = await play_tables(play, recorder, range(tables), rate)
    server_cpu, client_cpu, machine_cpu, by_pid, changed = await cpu
    return RunResult(
        label,
        tables,
        seconds,
        recorder.rounds_in_window,
        recorder.rounds_played,
        recorder.latencies,
        recorder.errors,
        server_cpu,
        client_cpu + load_cpu / seconds,
        machine_cpu,
        by_pid,
        changed,
        rate or 0.0,
        offered,
        shed,
        connections,
    )


async def measure_sizes(play: RoundPlayer) -> tuple[list[int], list[int], int]:
    """Mean request and response sizes of each call over a few real rounds, played in turn."""
    recorder = Recorder(sizes=[[] for _ in RPCS])
    for _ in range(SIZE_ROUNDS):
        await play(0, recorder)
    assert recorder.sizes is not None
    requests = [round(sum(s[0] for s in pairs) / len(pairs)) for pairs in recorder.sizes]
    responses = [round(sum(s[1] for s in pairs) / len(pairs)) for pairs in recorder.sizes]
    return requests, responses, SIZE_ROUNDS


# --- the bare server (a child process) --------------------------------------------------------


def _echo(payload: bytes) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def handle(request: bytes, context: Any) -> bytes:
        return payload

    return handle


async def serve_bare(port: int, response_sizes: Sequence[int]) -> None:
    # SO_REUSEPORT: N bare processes share one port, as gnau serve's workers do.
    server = grpc.aio.server(maximum_concurrent_rpcs=1000, options=[("grpc.so_reuseport", 1)])
    handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        name: grpc.unary_unary_rpc_method_handler(_echo(secrets.token_bytes(size)))
        for name, size in zip(RPCS, response_sizes, strict=True)
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(BARE_SERVICE, handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"bare: serving on 127.0.0.1:{port}", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    await server.stop(1.0)


def serve_front(gnau_arguments: Sequence[str]) -> int:
    """``gnau serve`` whose dealer answers Shuffle, Deal, Reveal and Settle with the views of one
    round dealt at start-up: the service's gRPC side, measured alone. The round carries its rule
    set's disclosed figures, as the service's rounds do."""
    rules = HouseRules()
    committed = CommittedRound(f"r-{secrets.token_hex(12)}", rules, secrets.token_bytes(32))
    seats = [LockedSeat(n, f"p-{n:032x}", 100 * n, os.urandom(16)) for n in range(1, SEATS + 1)]
    locked = committed.lock(seats)
    now = utc_now()
    shuffled = RoundRecord(
        committed.round_id, "bench", RoundState.SHUFFLED, rules, committed.commitment,
        "00000000", now, now, DEFAULT_OPERATOR, log_indices=(1,),
        return_to_player=ReturnToPlayer.of_rules(rules),
    )  # fmt: skip
    dealt = replace(
        shuffled,
        state=RoundState.DEALT,
        seats=locked.seats,
        transcript_hash=locked.transcript_hash,
        log_indices=(1, 2),
    )
    views = {
        "shuffle": shuffled,
        "deal": dealt,
        "reveal": replace(dealt, state=RoundState.REVEALED, log_indices=(1, 2, 3)),
        "settle": replace(dealt, state=RoundState.SETTLED, log_indices=(1, 2, 3, 4)),
    }
    for step, record in views.items():
        setattr(Dealer, step, _answer(view_of(record, committed.server_seed)))
    return gnau_main(list(gnau_arguments))


async def dealer_alone(database: str, tables: int, seconds: float) -> dict[str, float]:
    """Rounds per second and CPU per round of the dealer on a fresh store, without gRPC. Each
    round carries its rule set's disclosed figures, as the service's Shuffle gives them."""
    signer = LogSigner.from_private_key("bench/dealer-alone", Ed25519PrivateKey.generate())
    store = open_store(database, signer)
    dealer = Dealer(store)
    rules = HouseRules()
    rounds = 0
    deadline = time.perf_counter() + seconds

    def fresh() -> Idempotency:
        return Idempotency(request_id(), secrets.token_hex(32))

    catalogue = Catalogue(store)
    config = TableConfig(Currency.of("EUR"), (rules,), max_stake=1_000_000)
    for table in range(tables):
        await catalogue.add_table(DEFAULT_OPERATOR, f"alone-{table}", config, actor=BENCH_ACTOR)

    async def table_loop(table: int) -> None:
        nonlocal rounds
        while time.perf_counter() < deadline:
            view = await dealer.shuffle(
                f"alone-{table}", rules, fresh(), operator=DEFAULT_OPERATOR, actor=BENCH_ACTOR
            )
            round_id = view.record.round_id
            seats = [
                SeatRequest(n, f"player-{n}", 100 * n, os.urandom(16)) for n in range(1, SEATS + 1)
            ]
            await dealer.deal(
                round_id, seats, None, fresh(), operator=DEFAULT_OPERATOR, actor=BENCH_ACTOR
            )
            await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=BENCH_ACTOR)
            await dealer.settle(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=BENCH_ACTOR)
            rounds += 1

    started, cpu = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(table_loop(table) for table in range(tables)))
    finally:
        store.close()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"rounds_per_second": rounds / wall, "cpu_ms_per_round": cpu * 1000 / max(rounds, 1)}


#: The entries each process of the service logs of itself: its start, its settings, its stop.
PROCESS_ENTRIES: Final = 3
#: The actor the bench's rounds are played by: a token name of a typical length.
BENCH_ACTOR = "token:casino-a-platform"


def actor_cost(rounds: int = 1500) -> dict[str, float]:
    """What naming the actor adds to a round's four entries: bytes per entry, and the CPU of
    encoding (RFC 8785), signing (Ed25519) and hashing (the Merkle leaf) them, with the actor
    against without, interleaved round by round so that both see the same machine. The rest
    of a step (its SQL, the deal) does not depend on the actor."""
    signer = LogSigner.from_private_key("bench/actor", Ed25519PrivateKey.generate())
    committed = CommittedRound.with_fresh_seed("r-bench-actor", HouseRules())
    seats = [LockedSeat(n, f"p-{n:032x}", 100 * n) for n in range(1, SEATS + 1)]
    dealt = committed.lock(seats).deal()
    payloads = [
        (EntryKind.ROUND_COMMITTED, committed_payload(committed, "t-1")),
        (EntryKind.ROUND_DEALT, {**dealt_payload(dealt), "software": software_identity()}),
        (EntryKind.ROUND_REVEALED, revealed_payload(dealt)),
        (EntryKind.ROUND_SETTLED, settled_payload(settle_round(dealt.reveal()))),
    ]
    with_actor = [(kind, {**payload, "actor": BENCH_ACTOR}) for kind, payload in payloads]
    time_text = "2026-12-05T12:00:00.000000Z"

    def entries(round_payloads: list[tuple[EntryKind, dict[str, Any]]]) -> list[bytes]:
        return [
            encode_entry(
                signer.signer,
                index=index,
                kind=kind,
                time=time_text,
                payload=payload,
                prev_hash="0" * 64,
                round_id="r-bench-actor",
            )
            for index, (kind, payload) in enumerate(round_payloads)
        ]

    spent = {"with": 0.0, "without": 0.0}
    for _ in range(rounds):
        for label, chosen in (("without", payloads), ("with", with_actor)):
            started = time.process_time()
            for data in entries(chosen):
                leaf_hash(data)
            spent[label] += time.process_time() - started
    sizes = {
        label: sum(map(len, entries(chosen)))
        for label, chosen in (("without", payloads), ("with", with_actor))
    }
    return {
        "bytes_per_entry": (sizes["with"] - sizes["without"]) / len(payloads),
        "us_per_round_with": spent["with"] * 1e6 / rounds,
        "us_per_round_without": spent["without"] * 1e6 / rounds,
    }


def _actor_cost_text(figures: dict[str, float]) -> str:
    added = figures["us_per_round_with"] - figures["us_per_round_without"]
    return (
        f"+{figures['bytes_per_entry']:.0f} bytes per entry ({BENCH_ACTOR!r}); encoding, "
        f"signing and hashing a round's four entries: {figures['us_per_round_with']:.0f} us "
        f"with the actor, {figures['us_per_round_without']:.0f} us without "
        f"({added:+.1f} us per round)"
    )


def run_dealer_alone(database: str, arguments: argparse.Namespace) -> dict[str, float] | str:
    """:func:`dealer_alone` in a child process: its figures, or why it failed."""
    child = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--dealer-alone",
            database,
            "--tables",
            str(arguments.tables),
            "--seconds",
            str(arguments.seconds),
        ],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT + arguments.seconds * 3,
        check=False,
    )
    if child.returncode != 0:
        return f"failed ({child.returncode}): {child.stderr.strip()[-300:]}"
    figures: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
    return figures


def _answer(view: Any) -> Callable[..., Awaitable[Any]]:
    async def step(self: Any, *arguments: Any, **keywords: Any) -> Any:  # a step's deadline too
        return view

    return step


# --- one backend --------------------------------------------------------------------------------


@dataclass
class Verification:
    entries: int
    expected_entries: int
    rounds_settled: int
    rounds_played: int
    summary: list[str]
    ok: bool
    problems: list[str]


def verify_log(
    database: str, vkey: str, bundle: Path, rounds_played: int, starts: int = 1
) -> Verification:
    """Export the log and verify it offline with the log's key pinned. ``starts``: the
    processes that served it, each of which logged SERVICE_STARTED, CONFIG_CHANGED and, as it
    stopped cleanly before the export, SERVICE_STOPPED."""
    export = subprocess.run(
        [GNAU, "audit", "export", "--database", database, "--out", str(bundle)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    problems = []
    wrote = re.search(r"\(([\d,]+) in all\)", export.stdout)  # "wrote entries 0-N (M in all)"
    if export.returncode != 0 or wrote is None:
        problems.append(f"export failed ({export.returncode}): {export.stderr.strip()}")
        return Verification(0, 0, 0, rounds_played, [], False, problems)
    entries = int(wrote.group(1).replace(",", ""))
    check = subprocess.run(
        [GNAU, "audit", "verify", "--key", vkey, str(bundle)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    summary = check.stdout.strip().splitlines()
    # Each table the log's catalogue holds was catalogued once (the first start's starter tables
    # and the benchmark's own), one TABLE_CHANGED entry each.
    tables = catalogued_tables(bundle)
    expected = PROCESS_ENTRIES * starts + len(tables) + 4 * rounds_played  # four per round
    settled = 0
    rounds = re.search(
        r"rounds: ([\d,]+) settled and replayed, ([\d,]+) voided, ([\d,]+) still", check.stdout
    )
    if check.returncode != 0 or "result: VALID" not in check.stdout:
        problems.append(f"verify failed ({check.returncode}): {check.stderr.strip()[-300:]}")
    if rounds is None:
        problems.append("verify printed no rounds line")
    else:
        settled, voided, still_open = (int(g.replace(",", "")) for g in rounds.groups())
        if settled != rounds_played or voided or still_open:
            problems.append(
                f"{settled} settled, {voided} voided, {still_open} open; "
                f"{rounds_played} rounds were played"
            )
    if entries != expected:
        problems.append(f"{entries} entries in the log, {expected} expected")
    return Verification(entries, expected, settled, rounds_played, summary, not problems, problems)


def catalogued_tables(bundle: Path) -> set[tuple[str, str]]:
    """The tables of the TABLE_CHANGED entries of an exported ``bundle``, each of which must be
    a table's first version (a :class:`ValueError` otherwise)."""
    tables: set[tuple[str, str]] = set()
    with bundle.open(encoding="utf-8") as lines:
        for line in lines:
            if "TABLE_CHANGED" not in line:
                continue
            entry = json.loads(line)
            entry = entry.get("entry", entry)
            if isinstance(entry, str):
                entry = json.loads(entry)
            if entry.get("kind") != "TABLE_CHANGED":
                continue
            payload = entry["payload"]
            table = (payload["operator"], payload["table_id"])
            if payload["version"] != 1 or table in tables:
                raise ValueError(f"table {table} was catalogued more than once")
            tables.add(table)
    return tables


def serve_arguments(port: int, data_dir: Path, database: str) -> list[str]:
    """``gnau serve``'s arguments in every benchmark: a local port, JSON logs, no reflection."""
    return [
        "--listen",
        f"127.0.0.1:{port}",
        "--data-dir",
        str(data_dir),
        "--log-format",
        "json",
        *database_arguments(database),
    ]


def database_arguments(database: str) -> list[str]:
    """``gnau serve``'s arguments in every benchmark besides its port, data directory and JSON
    logs (which :func:`tests.serving.served` gives): the database, no reflection."""
    return ["--database", database, "--reflection", "false"]


@dataclass
class BackendResult:
    label: str
    run: RunResult | None = None
    verification: Verification | None = None
    skipped: str | None = None
    bare: RunResult | None = None  # the bare run measured right after this one
    workers: int = 1
    fixed: RunResult | None = None  # the same server at a fixed offered load (open loop)
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        assert self.run is not None and self.bare is not None
        return self.run.rounds_per_second / self.bare.rounds_per_second


OfferedLoad = Callable[[RunResult], float]  # the closed-loop run -> the rate to offer


def workers_label(label: str, workers: int, unit: str = "workers") -> str:
    return label if workers == 1 else f"{label}, {workers} {unit}"


async def drive_both(
    label: str,
    make_load: Callable[[str], Load],
    server: ServedServer | ServerProcess | ServerGroup,
    arguments: argparse.Namespace,
    offered: OfferedLoad | None,
    *,
    channels: Sequence[grpc.aio.Channel],
) -> tuple[RunResult, RunResult | None]:
    """The closed-loop run, then (``offered``) the open-loop run at the offered load, on the
    same server; ``make_load(suffix)`` gives the load on fresh table names, played on
    ``channels`` in this process, or in ``--load-processes`` of its own."""

    async def run_on(run_label: str, suffix: str, rate: float | None = None) -> RunResult:
        load = make_load(suffix)
        return await drive(
            run_label,
            load.player(channels),
            server,
            tables=arguments.tables,
            warmup=arguments.warmup,
            seconds=arguments.seconds,
            rate=rate,
            load=load,
            processes=arguments.load_processes,
        )

    run = await run_on(label, "")
    if offered is None:
        return run, None
    rate = offered(run)
    return run, await run_on(f"{label} @ {rate:,.0f}/s", "-fixed", rate)


async def bench_backend(
    label: str,
    database: str,
    directory: Path,
    arguments: argparse.Namespace,
    sizes: list[tuple[list[int], list[int], int]],
    *,
    front_only: bool = False,
    workers: int = 1,
    offered: OfferedLoad | None = None,
) -> BackendResult:
    """Start ``gnau serve`` on ``database`` (``--workers`` if more than one), measure its sizes
    if not yet known, drive it (then at the ``offered`` load if given), stop it, then export
    and verify its log. ``front_only``: the gRPC side alone (step 5), which logs no rounds to
    verify."""
    name = label.lower().replace(" ", "-").replace(",", "")
    data_dir = directory / f"data-{name}"
    program = (
        [sys.executable, str(Path(__file__).resolve()), "--front-server"] if front_only else [GNAU]
    )
    more = ["--workers", str(workers)] if workers > 1 else []
    channels: list[grpc.aio.Channel] = []
    # served() waits for the start without yielding to the event loop: nothing else runs yet.
    with served(data_dir, *database_arguments(database), *more, program=program) as started:
        server = ServedServer(started)
        try:
            channels = open_channels(started.target, arguments.channels)
            extra = 0
            if not sizes:
                sizes.append(await measure_sizes(real_player(channels[0], started.token, name)))
                extra = SIZE_ROUNDS

            def make_load(suffix: str) -> Load:
                target, token = started.target, started.token
                return Load("real", target, token, name + suffix, arguments.channels)

            run, fixed = await drive_both(
                label, make_load, server, arguments, offered, channels=channels
            )
            run.rounds_played += extra + (fixed.rounds_played if fixed is not None else 0)
        finally:
            await close_channels(channels)
            # Another exit status is noted below, not raised.
            started.expected_status = status = started.terminate()
    notes = []
    if status != 0:
        tail = " | ".join(started.output().strip().splitlines()[-5:])
        notes.append(f"gnau serve exited with status {status}: {tail}")
        print(f"  {label}: {notes[-1]}")
    restarts = worker_restarts(started.stderr_path)
    if restarts:
        notes.append(restarts)
        print(f"  {label}: {restarts}")
    if front_only:
        return BackendResult(label, run, workers=workers, fixed=fixed, notes=notes)
    verification = verify_log(
        database, started.vkey, directory / f"{name}.bundle", run.rounds_played, starts=workers
    )
    return BackendResult(label, run, verification, workers=workers, fixed=fixed, notes=notes)


def worker_restarts(stderr: Path) -> str:
    """What a supervisor's log says of workers that exited while it served (JSON lines with a
    "worker" and an event naming an exit or a restart), or ""."""
    seen = []
    for line in stderr.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            event = str(record.get("event", "")) if isinstance(record, dict) else ""
            if any(word in event for word in ("exit", "restart", "died", "crash", "kill")):
                seen.append(f"{event} (worker {record.get('worker', '?')})")
    return f"supervisor log: {', '.join(seen[:5])}" if seen else ""


async def bench_bare(
    label: str,
    directory: Path,
    arguments: argparse.Namespace,
    sizes: tuple[list[int], list[int]],
    *,
    workers: int = 1,
    offered: OfferedLoad | None = None,
) -> BackendResult:
    """The bare service (``workers`` processes on one port), driven like the real one; the
    token only gives the same header size."""
    token = new_token()
    requests, responses = sizes
    port = free_port()
    name = label.replace(" ", "-").replace("#", "").replace(",", "")
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--bare-server",
        str(port),
        "--response-sizes",
        ",".join(map(str, responses)),
    ]
    server = ServerGroup([ServerProcess(f"{name}-{k}", argv, directory) for k in range(workers)])
    server.port = port
    channels: list[grpc.aio.Channel] = []
    try:
        await server.start()
        channels = open_channels(f"127.0.0.1:{port}", arguments.channels)

        def make_load(suffix: str) -> Load:
            target = f"127.0.0.1:{port}"
            return Load("bare", target, token, name, arguments.channels, tuple(requests))

        run, fixed = await drive_both(
            label, make_load, server, arguments, offered, channels=channels
        )
    finally:
        await close_channels(channels)
        server.stop()
    return BackendResult(label, run, workers=workers, fixed=fixed)


def scratch_postgres(admin_url: str, prefix: str = "gnau_bench_service") -> tuple[str, str] | str:
    """A fresh database next to ``admin_url``: (name, url), or why there can be none."""
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            name = f"{prefix}_{secrets.token_hex(4)}"
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"PostgreSQL at {admin_url} is unreachable: {reason}"
    return name, f"{admin_url.rsplit('/', 1)[0]}/{name}"


def drop_postgres(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- reporting ------------------------------------------------------------------------------------


def latency_cells(run: RunResult) -> list[str]:
    return [
        f"{run.percentile_ms(rpc, 0.50):.1f} / {run.percentile_ms(rpc, 0.99):.1f}"
        for rpc in range(len(RPCS))
    ]


def print_table(runs: Sequence[RunResult]) -> None:
    header = [
        "",
        "rounds/s",
        *(f"{name} p50/p99 ms" for name in RPCS),
        "cores srv/cli",
        "srv ms/round",
        "errors",
    ]
    rows = [
        [
            run.label,
            f"{run.rounds_per_second:,.0f}",
            *latency_cells(run),
            f"{run.server_cpu:.2f} / {run.client_cpu:.2f}",
            f"{run.server_ms_per_round:.1f}",
            str(len(run.errors)),
        ]
        for run in runs
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  " + "  ".join(cells))


def markdown(
    arguments: argparse.Namespace,
    results: Sequence[BackendResult],
    front: BackendResult,
    sizes: tuple[list[int], list[int]],
) -> str:
    lines = [
        f"Service throughput (`bench/bench_service.py`: {arguments.tables} tables, "
        f"{arguments.seconds:g} s after {arguments.warmup:g} s warm-up, {os.cpu_count()} cores; "
        "server and load generator in separate processes on one machine; every entry signed "
        "and durable before its call returns). The baseline is a bare `grpc.aio` service with "
        "messages of the same size, measured in the same run right after each backend:",
        "",
        "| service | rounds/s | vs bare | "
        + " | ".join(f"{name} p50 / p99 ms" for name in RPCS)
        + " | server CPU ms/round | log verified offline |",
        "|---|---:|---:|" + "---:|" * len(RPCS) + "---:|---|",
    ]
    for result in results:
        if result.run is None:
            lines.append(f"| {result.label} | skipped: {result.skipped} |")
            continue
        verified = result.verification
        check = (
            f"VALID: {verified.entries:,} entries, {verified.rounds_settled:,} rounds settled"
            if verified is not None and verified.ok
            else "FAILED"
        )
        for run, ratio, note in (
            (result.run, f"{result.ratio:.2f}", check),
            (result.bare, "1.00", "n/a"),
        ):
            assert run is not None
            lines.append(
                f"| {run.label} | {run.rounds_per_second:,.0f} | {ratio} | "
                + " | ".join(latency_cells(run))
                + f" | {run.server_ms_per_round:.1f} | {note} |"
            )
    if front.run is not None and front.bare is not None:
        lines.append(
            f"| {FRONT_ONLY} | {front.run.rounds_per_second:,.0f} | {front.ratio:.2f} | "
            + " | ".join(latency_cells(front.run))
            + f" | {front.run.server_ms_per_round:.1f} | nothing logged |"
        )
    requests, responses = sizes
    lines += [
        "",
        "Message sizes (request / response bytes): "
        + ", ".join(f"{n} {q} / {r}" for n, q, r in zip(RPCS, requests, responses, strict=True))
        + f". Target: at least {TARGET_RATIO:.2f} of the bare rate.",
    ]
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------------


async def run_benchmark(arguments: argparse.Namespace) -> int:
    counts: list[int] = arguments.workers
    print(
        f"Gnau Dealer service benchmark: {arguments.tables} tables, {arguments.seconds:g} s "
        f"measured after {arguments.warmup:g} s warm-up, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, grpcio {grpc.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
        + (
            f"; workers {','.join(map(str, counts))}, {arguments.channels} channels"
            if counts != [1] or arguments.channels != 1
            else ""
        )
    )
    busy = machine_busy_seconds()
    await asyncio.sleep(1.0)
    busy = machine_busy_seconds() - busy
    if busy > BUSY_BEFORE:
        print(
            f"  WARNING: {busy:.2f} cores were busy in the second before the start: another "
            "benchmark or test run skews every figure (the other cores columns show how much)"
        )
    started = time.monotonic()
    sizes_found: list[tuple[list[int], list[int], int]] = []
    rates: dict[str, float] = {}

    def offered(service: str) -> OfferedLoad | None:
        """The fixed offered load of ``service``: set by its first count's closed-loop run."""
        if not arguments.fixed_runs:
            return None

        def rate(run: RunResult) -> float:
            if service not in rates:
                rates[service] = arguments.rate or arguments.fixed_load * run.rounds_per_second
            return rates[service]

        return rate

    def count_text(workers: int, unit: str = "worker", units: str = "workers") -> str:
        return "" if counts == [1] else f", {workers} {units if workers > 1 else unit}"

    groups: dict[str, list[BackendResult]] = {"bare gRPC": [], "SQLite": [], "PostgreSQL": []}
    with tempfile.TemporaryDirectory(prefix="gnau-bench-service-") as temp:
        directory = Path(temp)

        for workers in counts:
            print(
                "\n1. Real service, SQLite (fresh file; WAL, synchronous=FULL)"
                + count_text(workers)
            )
            result = await bench_backend(
                workers_label("SQLite", workers),
                f"sqlite:///{directory / f'gnau-{workers}.db'}",
                directory,
                arguments,
                sizes_found,
                workers=workers,
                offered=offered("SQLite"),
            )
            if not groups["SQLite"]:
                requests, responses, _ = sizes_found[0]
                print(
                    "  message sizes (request / response bytes, mean of "
                    f"{SIZE_ROUNDS} rounds): "
                    + ", ".join(
                        f"{n} {q}/{r}" for n, q, r in zip(RPCS, requests, responses, strict=True)
                    )
                )
            report_backend(result)
            groups["SQLite"].append(result)
        sqlite = groups["SQLite"][0]

        for workers in counts:
            print(
                "\n2. Bare grpc.aio service #1, same message sizes (separate process)"
                + count_text(workers, "process", "processes on one port")
            )
            bare = await bench_bare(
                workers_label("bare gRPC #1", workers, "processes"),
                directory,
                arguments,
                (requests, responses),
                workers=workers,
                offered=offered("bare gRPC"),
            )
            report_backend(bare)
            groups["bare gRPC"].append(bare)
        sqlite.bare = groups["bare gRPC"][0].run
        results = [sqlite]

        for workers in counts:
            label = workers_label("PostgreSQL", workers)
            print(f"\n3. Real service, PostgreSQL (scratch database){count_text(workers)}")
            if arguments.no_postgres:
                postgres = BackendResult(label, skipped="--no-postgres", workers=workers)
            else:
                scratch = scratch_postgres(arguments.postgres_url)
                if isinstance(scratch, str):
                    postgres = BackendResult(label, skipped=scratch, workers=workers)
                else:
                    name, url = scratch
                    print(f"  database {name}")
                    try:
                        postgres = await bench_backend(
                            label,
                            url,
                            directory,
                            arguments,
                            sizes_found,
                            workers=workers,
                            offered=offered("PostgreSQL"),
                        )
                    finally:
                        drop_postgres(arguments.postgres_url, name)
            report_backend(postgres)
            groups["PostgreSQL"].append(postgres)
        postgres = groups["PostgreSQL"][0]
        if postgres.run is not None:
            print(
                "\n4. Bare grpc.aio service #2, same message sizes (separate process)"
                + count_text(counts[0], "process", "processes on one port")
            )
            postgres.bare = (
                await bench_bare(
                    workers_label("bare gRPC #2", counts[0], "processes"),
                    directory,
                    arguments,
                    (requests, responses),
                    workers=counts[0],
                )
            ).run
            assert postgres.bare is not None
            report_bare(postgres.bare)
        results.append(postgres)

        print("\n5. The service's gRPC side alone: the four steps answered from memory")
        front = await bench_backend(
            FRONT_ONLY,
            f"sqlite:///{directory / 'front.db'}",
            directory,
            arguments,
            sizes_found,
            front_only=True,
        )
        front.bare = postgres.bare or sqlite.bare
        report_backend(front)

        print("\n6. The dealer and the store alone, no gRPC (child process)")
        alone: dict[str, dict[str, float] | str] = {
            "SQLite": run_dealer_alone(f"sqlite:///{directory / 'alone.db'}", arguments)
        }
        if not arguments.no_postgres:
            scratch = scratch_postgres(arguments.postgres_url)
            if isinstance(scratch, str):
                alone["PostgreSQL"] = scratch
            else:
                try:
                    alone["PostgreSQL"] = run_dealer_alone(scratch[1], arguments)
                finally:
                    drop_postgres(arguments.postgres_url, scratch[0])
        for label, figures in alone.items():
            print(f"  {label}: {_alone_text(figures)}")

        print("\n7. The actor each entry names (issue 37): what it adds, in this run")
        print(f"  {_actor_cost_text(actor_cost())}")

    print(
        f"\nResults ({time.monotonic() - started:.0f} s in all; "
        f"load average now {os.getloadavg()[0]:.1f})"
    )
    every_run = [
        run
        for rows in groups.values()
        for row in rows
        for run in (row.run, row.fixed)
        if run is not None
    ]
    shown = [run for r in results for run in (r.run, r.bare) if run is not None]
    shown += [run for run in (front.run,) if run is not None]
    print_table(shown + [run for run in every_run if all(run is not r for r in shown)])
    failures = 0
    for result in results:
        if result.run is None or result.bare is None:
            print(f"  {result.label}: skipped ({result.skipped})")
            continue
        verdict = "meets" if result.ratio >= TARGET_RATIO else "MISSES"
        print(
            f"  {result.label}: real/bare = {result.run.rounds_per_second:,.0f} / "
            f"{result.bare.rounds_per_second:,.0f} ({result.bare.label}) = {result.ratio:.2f}, "
            f"{verdict} the target of {TARGET_RATIO:.2f}"
        )
        real_ms, bare_ms = result.run.server_ms_per_round, result.bare.server_ms_per_round
        print(
            f"  {'':{len(result.label)}}  server CPU per round: {real_ms:.1f} ms against "
            f"{bare_ms:.1f} ms bare (bare/real {bare_ms / real_ms:.2f}: steadier than the rates "
            "on a shared machine)"
        )
        failures += bool(result.bare.errors)
    for rows in groups.values():
        for row in rows:
            if row.run is None:
                continue
            failures += bool(row.run.errors) + bool(row.fixed is not None and row.fixed.errors)
            failures += row.workers > 1 and bool(row.notes)
            if not row.label.startswith("bare"):
                failures += row.verification is None or not row.verification.ok
    assert front.run is not None and front.bare is not None
    print(
        f"  {FRONT_ONLY}: {front.run.rounds_per_second:,.0f} rounds/s = {front.ratio:.2f} of "
        f"{front.bare.label}, {front.run.server_ms_per_round:.1f} ms of server CPU per round: "
        "the ceiling of one service process, whatever its store costs"
    )
    failures += bool(front.run.errors)
    for label, figures in alone.items():
        print(f"  dealer + store alone, {label}: {_alone_text(figures)}")
        failures += isinstance(figures, str)
    for run in [*every_run, *(r.bare for r in results if r.bare is not None), front.run]:
        for error in run.errors[:3]:
            print(f"  {run.label} error: {error}")
        if run.processes_changed:
            print(
                f"  {run.label}: the server's processes changed in the window: "
                f"{run.processes_changed}"
            )
    if counts != [1] or arguments.fixed_runs:
        print()
        failures += report_workers(groups, rates)

    print("\nMarkdown for the README:\n")
    print(markdown(arguments, results, front, (requests, responses)))
    print(
        "\nThe dealer and the store alone (no gRPC): "
        + "; ".join(f"{label} {_alone_text(figures)}" for label, figures in alone.items())
        + "."
    )
    if counts != [1] or arguments.fixed_runs:
        print("\nWorkers (issue 26), markdown:\n")
        print(workers_markdown(arguments, groups))
    return 1 if failures else 0


def _alone_text(figures: dict[str, float] | str) -> str:
    if isinstance(figures, str):
        return figures
    return (
        f"{figures['rounds_per_second']:,.0f} rounds/s, "
        f"{figures['cpu_ms_per_round']:.2f} ms of CPU per round"
    )


def report_bare(run: RunResult) -> None:
    print(
        f"  {run.rounds_played:,} rounds played ({run.rounds_in_window:,} in the window), "
        f"{len(run.errors)} errors"
    )


def report_backend(result: BackendResult) -> None:
    if result.run is None:
        print(f"  skipped: {result.skipped}")
        return
    run, verified = result.run, result.verification
    print(
        f"  {run.rounds_played:,} rounds played ({run.rounds_in_window:,} in the window), "
        f"{len(run.errors)} errors"
        + (
            f"; {run.rounds_per_second:,.0f} rounds/s, server cores (connections) "
            f"{cores_text(run, supervised=not result.label.startswith('bare'))}, "
            f"other cores {run.other_cpu:.2f}"
            if result.workers > 1 or result.fixed is not None
            else ""
        )
    )
    if result.fixed is not None:
        fixed = result.fixed
        print(
            f"  fixed load: {fixed.offered:,.0f} rounds/s offered, {fixed.rounds_per_second:,.0f}"
            f" done, {fixed.shed} shed, {len(fixed.errors)} errors; p99 ms "
            + " / ".join(f"{fixed.percentile_ms(rpc, 0.99):.1f}" for rpc in range(len(RPCS)))
        )
    if verified is None:
        return
    processes = verified.expected_entries - 4 * verified.rounds_played
    print(
        f"  log: {verified.entries:,} entries written (expected {processes} + 4 x "
        f"{verified.rounds_played:,} = {verified.expected_entries:,})"
    )
    print("  gnau audit verify --key <log key>:")
    for line in verified.summary:
        print(f"    {line}")
    for problem in verified.problems:
        print(f"  PROBLEM: {problem}")


# --- workers (issue 26) ---------------------------------------------------------------------------


def cores_text(run: RunResult, *, supervised: bool) -> str:
    """The server's cores by process: ``supervisor + worker / worker`` for a supervised server
    (its first process), else each process's; in brackets, the connections each holds."""
    cores = [
        f"{value:.2f}" + (f" ({run.connections[pid]})" if run.connections.get(pid) else "")
        for pid, value in run.process_cpu.items()
    ]
    if supervised and len(cores) > 1:
        return f"{cores[0]} + {' / '.join(cores[1:])}"
    return " / ".join(cores) or f"{run.server_cpu:.2f}"


@dataclass
class Scaling:
    """One count of one service against the service's first count, in the same run."""

    row: BackendResult
    speedup: float | None = None  # rounds/s over the first count's
    ceiling: float | None = None  # the most speedup the first count's CPU figures allow
    machine_ceiling: float | None = None  # the same, with the whole machine's CPU per round
    cpu_growth: float | None = None  # server CPU per round over the first count's, minus 1

    @property
    def share(self) -> float | None:
        """The share of the ceiling reached."""
        if self.speedup is None or not self.ceiling:
            return None
        return self.speedup / self.ceiling

    @property
    def machine_share(self) -> float | None:
        """The share of the machine's ceiling reached."""
        if self.speedup is None or not self.machine_ceiling:
            return None
        return self.speedup / self.machine_ceiling


def scaling(rows: Sequence[BackendResult]) -> list[Scaling]:
    """With the first count's server and load generator CPU per round S and C, N workers on
    ``cores`` cores can at most play min(cores / (S + C), N / S) rounds a millisecond: the
    ceiling is that over the first count's rate (also with the machine's CPU per round, which
    counts PostgreSQL's processes and everything else, in place of S + C)."""
    first = rows[0].run if rows else None
    out = []
    cores = os.cpu_count() or 1
    for row in rows:
        run = row.run
        if first is None or run is None or not first.rounds_in_window or not run.rounds_in_window:
            out.append(Scaling(row))
            continue
        server, client = first.server_ms_per_round, first.client_ms_per_round
        machine = max(first.machine_ms_per_round, server + client)
        base = first.rounds_per_second
        ceiling = 1000 * min(cores / (server + client), row.workers / server) / base
        machine_ceiling = 1000 * min(cores / machine, row.workers / server) / base
        out.append(
            Scaling(
                row,
                run.rounds_per_second / base,
                ceiling,
                machine_ceiling,
                run.server_ms_per_round / server - 1,
            )
        )
    return out


def p99_verdict(row: BackendResult, first: BackendResult) -> str:
    """Each call's p99 at the fixed load against the first count's: "no worse", or by how much
    it is worse."""
    if row.fixed is None or first.fixed is None:
        return "no fixed-load run"
    pairs = [
        (name, row.fixed.percentile_ms(rpc, 0.99), first.fixed.percentile_ms(rpc, 0.99))
        for rpc, name in enumerate(RPCS)
    ]
    worse = [f"{name} {now:.1f} > {then:.1f}" for name, now, then in pairs if now > then]
    return "no worse" if not worse else "WORSE: " + ", ".join(worse) + " ms"


def report_workers(groups: dict[str, list[BackendResult]], rates: dict[str, float]) -> int:
    """Print each service's counts against its first, and the issue's targets (for the real
    service); returns the number of problems (errors, restarts, failed logs)."""
    problems = 0
    print("Workers (issue 26): each count against the first, in this run")
    for service, rows in groups.items():
        for item in scaling(rows)[1:]:
            row, first = item.row, rows[0]
            if row.run is None or first.run is None or item.speedup is None:
                print(f"  {row.label}: skipped ({row.skipped or first.skipped})")
                continue
            assert item.ceiling is not None and item.machine_ceiling is not None
            assert item.cpu_growth is not None and item.share is not None
            targets = service != "bare gRPC"
            verdicts = [
                (
                    f"{item.speedup:.2f}x the rounds/s of {first.label}",
                    item.speedup >= SPEEDUP_TARGET,
                    f">= {SPEEDUP_TARGET}x",
                ),
                (
                    f"{item.share:.0%} of the ceiling {item.ceiling:.2f}x "
                    f"({item.machine_share:.0%} of {item.machine_ceiling:.2f}x with the "
                    "machine's CPU)",
                    item.share >= CEILING_SHARE_TARGET,
                    f">= {CEILING_SHARE_TARGET:.0%}",
                ),
                (
                    f"server CPU per round {first.run.server_ms_per_round:.2f} -> "
                    f"{row.run.server_ms_per_round:.2f} ms ({item.cpu_growth:+.0%})",
                    item.cpu_growth <= CPU_GROWTH_TARGET,
                    f"<= +{CPU_GROWTH_TARGET:.0%}",
                ),
            ]
            p99 = p99_verdict(row, first)
            if row.fixed is not None:
                verdicts.append(
                    (
                        f"p99 at {rates.get(service, 0):,.0f} rounds/s offered: {p99}",
                        p99 == "no worse",
                        "no worse",
                    )
                )
            print(f"  {row.label}:")
            for text, met, target in verdicts:
                mark = ("meets" if met else "MISSES") + f" {target}" if targets else "reported"
                print(f"    {text}: {mark}")
            closed = " / ".join(
                f"{first.run.percentile_ms(rpc, 0.99):.1f} -> "
                f"{row.run.percentile_ms(rpc, 0.99):.1f}"
                for rpc in range(len(RPCS))
            )
            print(
                f"    p99 ms at {row.run.tables} tables (closed loop), {'/'.join(RPCS)}: {closed}"
            )
            print(
                f"    server cores (connections) by process: "
                f"{cores_text(first.run, supervised=targets)} -> "
                f"{cores_text(row.run, supervised=targets)}; other cores on the machine "
                f"{first.run.other_cpu:.2f} -> {row.run.other_cpu:.2f}; the machine busy "
                f"{first.run.machine_cpu:.2f} -> {row.run.machine_cpu:.2f} of "
                f"{os.cpu_count()} cores"
            )
    for rows in groups.values():
        for row in rows:
            for run in (row.run, row.fixed):
                if run is not None and run.processes_changed:
                    print(f"  PROBLEM: {run.label}: processes changed in the window")
                    problems += 1
            for note in row.notes:
                print(f"  PROBLEM: {row.label}: {note}")
            if row.fixed is not None and row.fixed.shed:
                print(f"  {row.fixed.label}: {row.fixed.shed} rounds shed (no table free)")
    return problems


def workers_markdown(arguments: argparse.Namespace, groups: dict[str, list[BackendResult]]) -> str:
    lines = [
        f"Workers (issue 26) (`bench/bench_service.py --workers "
        f"{','.join(map(str, arguments.workers))}`: {arguments.tables} tables on "
        f"{arguments.channels} connections, {arguments.seconds:g} s after {arguments.warmup:g} s "
        f"warm-up, {os.cpu_count()} cores shared by the server and the load generator, each in "
        "its own process). Ceiling: the speed-up the first count's own CPU figures allow, "
        "min(cores / (S + C), N / S) rounds per ms over its rate, S and C the server's and the "
        "load generator's CPU ms per round (in brackets, for the ceiling and the share of it: the "
        "machine's whole CPU per round, "
        "which counts PostgreSQL's processes, in place of S + C). Fixed load: the same server "
        "driven open-loop at "
        + (
            f"{arguments.rate:g} rounds/s"
            if arguments.rate
            else f"{arguments.fixed_load:.0%} of the first count's rate"
        )
        + ", the same offered load for every count.",
        "",
        "| service | workers | rounds/s | vs first | ceiling | % of ceiling | server CPU ms/round "
        "| client CPU ms/round | other cores | server cores (connections) by process "
        "| p50 ms S / D / R / Se "
        "| p99 ms S / D / R / Se | fixed load: offered rounds/s, p99 ms S / D / R / Se |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for service, rows in groups.items():
        for item in scaling(rows):
            row, run = item.row, item.row.run
            if run is None:
                lines.append(f"| {service} | {row.workers} | skipped: {row.skipped} |")
                continue
            first = item.speedup is None or item.row is rows[0]
            fixed = row.fixed
            lines.append(
                f"| {service} | {row.workers} | {run.rounds_per_second:,.0f} | "
                + ("1.00" if first else f"{item.speedup:.2f}")
                + " | "
                + ("" if first else f"{item.ceiling:.2f} ({item.machine_ceiling:.2f})")
                + " | "
                + (
                    ""
                    if first or item.share is None
                    else f"{item.share:.0%} ({item.machine_share:.0%})"
                )
                + f" | {run.server_ms_per_round:.2f}"
                + ("" if first else f" ({item.cpu_growth:+.0%})")
                + f" | {run.client_ms_per_round:.2f} | {run.other_cpu:.2f}"
                + f" | {cores_text(run, supervised=service != 'bare gRPC')}"
                + " | "
                + " / ".join(f"{run.percentile_ms(rpc, 0.50):.1f}" for rpc in range(len(RPCS)))
                + " | "
                + " / ".join(f"{run.percentile_ms(rpc, 0.99):.1f}" for rpc in range(len(RPCS)))
                + " | "
                + (
                    f"{fixed.offered:,.0f}: "
                    + " / ".join(
                        f"{fixed.percentile_ms(rpc, 0.99):.1f}" for rpc in range(len(RPCS))
                    )
                    + (f" ({fixed.shed} shed)" if fixed.shed else "")
                    if fixed is not None
                    else ""
                )
                + " |"
            )
    lines += [
        "",
        "Targets for the real service (SQLite, PostgreSQL) with 2 workers: at least "
        f"{SPEEDUP_TARGET}x the rounds/s of 1 and {CEILING_SHARE_TARGET:.0%} of the ceiling; "
        f"server CPU per round at most +{CPU_GROWTH_TARGET:.0%}; p99 at the fixed load no worse. "
        "Server cores by process: the supervisor's + each worker's (bare: each process's), with "
        "the load generator's connections each held. Other cores: the machine's busy cores "
        "outside the server and the load generator in the window (PostgreSQL's processes, "
        "anything else running).",
    ]
    return "\n".join(lines)


def workers_list(text: str) -> list[int]:
    """``--workers``: a comma list of counts, e.g. ``1,2``."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"not a comma list of counts from 1: {text!r}")
    return counts


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=32, help="concurrent tables (default 32)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per run")
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_POSTGRES_URL,
        help=f"an administrative PostgreSQL URL, for the scratch database ({DEFAULT_POSTGRES_URL})",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--workers",
        type=workers_list,
        default=[1],
        help="comma list of worker counts, e.g. 1,2 (issue 26): gnau serve --workers N and N bare"
        " processes on one port, each count on a fresh server (default 1: one process)",
    )
    parser.add_argument(
        "--channels",
        type=int,
        help="connections of the load generator, the same for every count: tables spread over "
        "them (default with --workers other than 1: one per table, else 1)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="the fixed offered load, rounds/s, of the open-loop run after each closed-loop one "
        "(default with --workers other than 1: --fixed-load x the first count's rate)",
    )
    parser.add_argument(
        "--fixed-load",
        type=float,
        default=FIXED_LOAD,
        help=f"the fixed load as a share of the first count's rate (default {FIXED_LOAD}; 0: no "
        "open-loop runs)",
    )
    parser.add_argument(
        "--load-processes",
        type=int,
        default=DEFAULT_LOAD_PROCESSES,
        help="processes the load runs in, tables spread over them, each on its own connections "
        f"(default {DEFAULT_LOAD_PROCESSES}: half this machine's cores, at most 8; 1: in this "
        "process)",
    )
    parser.add_argument("--load-child", help=argparse.SUPPRESS)
    parser.add_argument("--bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--front-server", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--dealer-alone", metavar="DATABASE", help=argparse.SUPPRESS)
    parser.add_argument("--response-sizes", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.tables < 1 or arguments.seconds <= 0 or arguments.warmup < 0:
        parser.error("--tables and --seconds must be positive, --warmup not negative")
    if arguments.channels is None:
        arguments.channels = 1 if arguments.workers == [1] else arguments.tables
    if arguments.channels < 1 or (arguments.rate is not None and arguments.rate <= 0):
        parser.error("--channels and --rate must be positive")
    if arguments.load_processes < 1:
        parser.error("--load-processes must be positive")
    # Open-loop runs: with more than one count (unless --fixed-load 0), or when --rate asks.
    arguments.fixed_runs = arguments.rate is not None or (
        arguments.workers != [1] and arguments.fixed_load > 0
    )
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    if arguments.load_child is not None:
        print(json.dumps(asyncio.run(load_child(json.loads(arguments.load_child)))))
        return
    if arguments.dealer_alone is not None:
        figures = asyncio.run(
            dealer_alone(arguments.dealer_alone, arguments.tables, arguments.seconds)
        )
        print(json.dumps(figures))
        return
    if arguments.front_server is not None:
        sys.exit(serve_front(arguments.front_server))
    if arguments.bare_server is not None:
        sizes = [int(size) for size in arguments.response_sizes.split(",")]
        asyncio.run(serve_bare(arguments.bare_server, sizes))
        return
    sys.exit(asyncio.run(run_benchmark(arguments)))


if __name__ == "__main__":
    main()
