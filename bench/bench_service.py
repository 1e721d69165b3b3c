"""The dealer service end to end over gRPC, beside a bare gRPC service measured in the same run.

Run: ``.venv/bin/python bench/bench_service.py`` (about a minute and a half with the defaults).

1. The real service (``gnau serve``) runs in its own process on a fresh SQLite file, then on a
   scratch PostgreSQL database (skipped, with the reason, if PostgreSQL is unreachable). Every
   change is a signed log entry, durable (group commit) before its call returns.
2. A load generator in this process, on its own ``grpc.aio`` channel and the generated stubs,
   runs ``--tables`` tasks at once, each playing whole rounds on its own table: Shuffle, Deal
   (three seats), Reveal, Settle. After ``--warmup`` seconds it measures for ``--seconds``:
   rounds completed per second and the p50/p99 latency of each of the four calls. Then every
   task finishes the round it is in, so every round in the log is settled.
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

The machine is shared and noisy, so compare the ratios, not absolute figures across runs. The
last thing printed is a markdown block for the README.
"""

from __future__ import annotations

import argparse
import asyncio
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
from gnau.v1 import dealer_pb2, dealer_pb2_grpc, round_pb2

from gnau_service.audit.signing import LogSigner
from gnau_service.cli.main import main as gnau_main
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.server.dealer import Dealer, Idempotency
from gnau_service.server.round_record import RoundRecord, RoundState
from gnau_service.server.round_view import view_of
from gnau_service.server.tokens import new_token
from gnau_service.server.validation import SeatRequest
from gnau_service.store import open_store
from gnau_service.store.transaction import utc_now

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


# --- processes ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServerProcess:
    """A server in a child process, its stdout and stderr in files under ``directory``."""

    def __init__(self, name: str, argv: Sequence[str], directory: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.stdout_path = directory / f"{name}.stdout"
        self.stderr_path = directory / f"{name}.stderr"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> str:
        """Start it and wait until it serves: a "serving on" line on stdout, or a JSON
        "serving" line on stderr (``gnau serve --log-format json``). Returns the log key the
        JSON line names ("" for a server that has none)."""
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=err)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if "serving on" in self.stdout_path.read_text(encoding="utf-8", errors="replace"):
                return ""
            for line in self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
                if '"serving"' in line and json.loads(line).get("event") == "serving":
                    return str(json.loads(line).get("key", ""))
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with status {self.process.returncode}: {self.tail()}"
                )
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start in {START_TIMEOUT:.0f} s: {self.tail()}")

    def tail(self) -> str:
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace").strip()
        return " | ".join(text.splitlines()[-5:]) or "(no stderr)"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far (every thread)."""
        assert self.process is not None
        stat = Path(f"/proc/{self.process.pid}/stat").read_text(encoding="ascii")
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

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


def request_id() -> str:
    return str(uuid.uuid4())


def real_player(channel: grpc.aio.Channel, token: str, tag: str) -> RoundPlayer:
    """One round of the real service on table ``bench-<tag>-<n>``: four calls, each awaited."""
    stub = dealer_pb2_grpc.DealerServiceStub(channel)
    options = {"metadata": (("authorization", f"Bearer {token}"),), "timeout": CALL_TIMEOUT}

    async def play(table: int, recorder: Recorder) -> None:
        shuffle = dealer_pb2.ShuffleRequest(
            request_id=request_id(), table_id=f"bench-{tag}-{table}"
        )
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
    calls = [channel.unary_unary(f"/{BARE_SERVICE}/{name}") for name in RPCS]  # bytes in and out
    payloads = [secrets.token_bytes(size) for size in request_sizes]
    options = {"metadata": (("authorization", f"Bearer {token}"),), "timeout": CALL_TIMEOUT}

    async def play(table: int, recorder: Recorder) -> None:
        for rpc, call in enumerate(calls):
            await recorder.call(rpc, partial(call, payloads[rpc], **options))

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

    @property
    def rounds_per_second(self) -> float:
        return self.rounds_in_window / self.seconds

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


async def drive(
    label: str,
    play: RoundPlayer,
    server: ServerProcess,
    *,
    tables: int,
    warmup: float,
    seconds: float,
) -> RunResult:
    """``tables`` tasks play rounds for ``warmup + seconds``; then each finishes its round."""
    recorder = Recorder()
    now = time.perf_counter()
    recorder.window_start = now + warmup
    recorder.window_end = recorder.window_start + seconds

    async def table_loop(table: int) -> None:
        while time.perf_counter() < recorder.window_end:
            try:
                await play(table, recorder)
            except (grpc.aio.AioRpcError, RuntimeError) as error:
                detail = (
                    f"{error.code().name}: {error.details()}"
                    if isinstance(error, grpc.aio.AioRpcError)
                    else str(error)
                )
                recorder.errors.append(f"table {table}: {detail}")
                return  # its round may be left open: the verification will say so
            recorder.rounds_played += 1
            if recorder.window_start <= time.perf_counter() <= recorder.window_end:
                recorder.rounds_in_window += 1

    async def measure_cpu() -> tuple[float, float]:
        await asyncio.sleep(max(0.0, recorder.window_start - time.perf_counter()))
        server_before, client_before = server.cpu_seconds(), time.process_time()
        await asyncio.sleep(max(0.0, recorder.window_end - time.perf_counter()))
        server_after, client_after = server.cpu_seconds(), time.process_time()
        return (server_after - server_before) / seconds, (client_after - client_before) / seconds

    cpu = asyncio.create_task(measure_cpu())
    await asyncio.gather(*(table_loop(table) for table in range(tables)))
    server_cpu, client_cpu = await cpu
    return RunResult(
        label,
        tables,
        seconds,
        recorder.rounds_in_window,
        recorder.rounds_played,
        recorder.latencies,
        recorder.errors,
        server_cpu,
        client_cpu,
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
    server = grpc.aio.server(maximum_concurrent_rpcs=1000)
    handlers = {
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


def serve_front(serve_arguments: Sequence[str]) -> int:
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
        "00000000", now, now, log_indices=(1,), return_to_player=ReturnToPlayer.of_rules(rules),
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
    return gnau_main(["serve", *serve_arguments])


async def dealer_alone(database: str, tables: int, seconds: float) -> dict[str, float]:
    """Rounds per second and CPU per round of the dealer on a fresh store, without gRPC. Each
    round carries its rule set's disclosed figures, as the service's Shuffle gives them."""
    signer = LogSigner.from_private_key("bench/dealer-alone", Ed25519PrivateKey.generate())
    store = open_store(database, signer)
    dealer = Dealer(store)
    rules = HouseRules()
    disclosed = ReturnToPlayer.of_rules(rules)  # seconds, before the clock starts
    rounds = 0
    deadline = time.perf_counter() + seconds

    def fresh() -> Idempotency:
        return Idempotency(request_id(), secrets.token_hex(32))

    async def table_loop(table: int) -> None:
        nonlocal rounds
        while time.perf_counter() < deadline:
            view = await dealer.shuffle(f"alone-{table}", rules, fresh(), disclosed)
            round_id = view.record.round_id
            seats = [
                SeatRequest(n, f"player-{n}", 100 * n, os.urandom(16)) for n in range(1, SEATS + 1)
            ]
            await dealer.deal(round_id, seats, None, fresh())
            await dealer.reveal(round_id, fresh())
            await dealer.settle(round_id, fresh())
            rounds += 1

    started, cpu = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(table_loop(table) for table in range(tables)))
    finally:
        store.close()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"rounds_per_second": rounds / wall, "cpu_ms_per_round": cpu * 1000 / max(rounds, 1)}


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
    async def step(self: Any, *arguments: Any) -> Any:
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
    processes that served it, each of which logged SERVICE_STARTED."""
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
    expected = starts + 4 * rounds_played  # SERVICE_STARTED per start, four entries per round
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


def serve_arguments(port: int, data_dir: Path, database: str) -> list[str]:
    """``gnau serve``'s arguments in every benchmark: a local port, JSON logs, no reflection."""
    return [
        "--listen",
        f"127.0.0.1:{port}",
        "--data-dir",
        str(data_dir),
        "--database",
        database,
        "--log-format",
        "json",
        "--reflection",
        "false",
    ]


@dataclass
class BackendResult:
    label: str
    run: RunResult | None = None
    verification: Verification | None = None
    skipped: str | None = None
    bare: RunResult | None = None  # the bare run measured right after this one

    @property
    def ratio(self) -> float:
        assert self.run is not None and self.bare is not None
        return self.run.rounds_per_second / self.bare.rounds_per_second


async def bench_backend(
    label: str,
    database: str,
    directory: Path,
    arguments: argparse.Namespace,
    sizes: list[tuple[list[int], list[int], int]],
    *,
    front_only: bool = False,
) -> BackendResult:
    """Start ``gnau serve`` on ``database``, measure its sizes if not yet known, drive it,
    stop it, then export and verify its log. ``front_only``: the gRPC side alone (step 5),
    which logs no rounds to verify."""
    name = label.lower().replace(" ", "-")
    data_dir = directory / f"data-{name}"
    port = free_port()
    command = (
        [sys.executable, str(Path(__file__).resolve()), "--front-server"]
        if front_only
        else [GNAU, "serve"]
    )
    server = ServerProcess(
        f"gnau-{name}", [*command, *serve_arguments(port, data_dir, database)], directory
    )
    try:
        vkey = await server.start()
        token = (data_dir / "operator-token").read_text(encoding="utf-8").strip()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            play = real_player(channel, token, name)
            extra = 0
            if not sizes:
                sizes.append(await measure_sizes(play))
                extra = SIZE_ROUNDS
            run = await drive(
                label,
                play,
                server,
                tables=arguments.tables,
                warmup=arguments.warmup,
                seconds=arguments.seconds,
            )
        run.rounds_played += extra
    finally:
        status = server.stop()
    if status not in (0, None):
        print(f"  {label}: gnau serve exited with status {status}: {server.tail()}")
    if front_only:
        return BackendResult(label, run)
    verification = verify_log(database, vkey, directory / f"{name}.bundle", run.rounds_played)
    return BackendResult(label, run, verification)


async def bench_bare(
    label: str,
    directory: Path,
    arguments: argparse.Namespace,
    sizes: tuple[list[int], list[int]],
) -> RunResult:
    """The bare service, driven like the real one; the token only gives the same header size."""
    token = new_token()
    requests, responses = sizes
    port = free_port()
    server = ServerProcess(
        label.replace(" ", "-").replace("#", ""),
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--bare-server",
            str(port),
            "--response-sizes",
            ",".join(map(str, responses)),
        ],
        directory,
    )
    try:
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            return await drive(
                label,
                bare_player(channel, token, requests),
                server,
                tables=arguments.tables,
                warmup=arguments.warmup,
                seconds=arguments.seconds,
            )
    finally:
        server.stop()


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
    print(
        f"Gnau Dealer service benchmark: {arguments.tables} tables, {arguments.seconds:g} s "
        f"measured after {arguments.warmup:g} s warm-up, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, grpcio {grpc.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    started = time.monotonic()
    sizes_found: list[tuple[list[int], list[int], int]] = []
    results: list[BackendResult] = []
    with tempfile.TemporaryDirectory(prefix="gnau-bench-service-") as temp:
        directory = Path(temp)

        print("\n1. Real service, SQLite (fresh file; WAL, synchronous=FULL)")
        sqlite = await bench_backend(
            "SQLite", f"sqlite:///{directory / 'gnau.db'}", directory, arguments, sizes_found
        )
        requests, responses, _ = sizes_found[0]
        print(
            "  message sizes (request / response bytes, mean of "
            f"{SIZE_ROUNDS} rounds): "
            + ", ".join(f"{n} {q}/{r}" for n, q, r in zip(RPCS, requests, responses, strict=True))
        )
        report_backend(sqlite)

        print("\n2. Bare grpc.aio service #1, same message sizes (separate process)")
        sqlite.bare = await bench_bare("bare gRPC #1", directory, arguments, (requests, responses))
        report_bare(sqlite.bare)
        results.append(sqlite)

        print("\n3. Real service, PostgreSQL (scratch database)")
        if arguments.no_postgres:
            postgres = BackendResult("PostgreSQL", skipped="--no-postgres")
        else:
            scratch = scratch_postgres(arguments.postgres_url)
            if isinstance(scratch, str):
                postgres = BackendResult("PostgreSQL", skipped=scratch)
            else:
                name, url = scratch
                print(f"  database {name}")
                try:
                    postgres = await bench_backend(
                        "PostgreSQL", url, directory, arguments, sizes_found
                    )
                finally:
                    drop_postgres(arguments.postgres_url, name)
        report_backend(postgres)
        if postgres.run is not None:
            print("\n4. Bare grpc.aio service #2, same message sizes (separate process)")
            postgres.bare = await bench_bare(
                "bare gRPC #2", directory, arguments, (requests, responses)
            )
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

    print(
        f"\nResults ({time.monotonic() - started:.0f} s in all; "
        f"load average now {os.getloadavg()[0]:.1f})"
    )
    print_table(
        [run for r in results for run in (r.run, r.bare) if run is not None]
        + [run for run in (front.run,) if run is not None]
    )
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
        failures += bool(result.run.errors) + bool(result.bare.errors)
        failures += result.verification is None or not result.verification.ok
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
    for run in (run for r in [*results, front] for run in (r.run, r.bare) if run is not None):
        for error in run.errors[:3]:
            print(f"  {run.label} error: {error}")

    print("\nMarkdown for the README:\n")
    print(markdown(arguments, results, front, (requests, responses)))
    print(
        "\nThe dealer and the store alone (no gRPC): "
        + "; ".join(f"{label} {_alone_text(figures)}" for label, figures in alone.items())
        + "."
    )
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
    )
    if verified is None:
        return
    print(
        f"  log: {verified.entries:,} entries written (expected 1 + 4 x {verified.rounds_played:,}"
        f" = {verified.expected_entries:,})"
    )
    print("  gnau audit verify --key <log key>:")
    for line in verified.summary:
        print(f"    {line}")
    for problem in verified.problems:
        print(f"  PROBLEM: {problem}")


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
    parser.add_argument("--bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--front-server", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--dealer-alone", metavar="DATABASE", help=argparse.SUPPRESS)
    parser.add_argument("--response-sizes", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.tables < 1 or arguments.seconds <= 0 or arguments.warmup < 0:
        parser.error("--tables and --seconds must be positive, --warmup not negative")
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
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
