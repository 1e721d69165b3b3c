"""Rounds beside hundreds of WatchEntries streams: the dealer must not notice the auditors.

Run: ``.venv/bin/python bench/bench_watch.py`` (about two minutes with the defaults).

For each backend (SQLite, then PostgreSQL if it answers):

1. ``gnau serve`` in its own process, with stream limits raised for the run (every stream comes
   from one address here).
2. The baseline, in the same run: one client in this process plays ``--rounds`` rounds one after
   another on one table (Shuffle, Deal with three seats, Reveal, Settle), and records each
   round's latency and the server's CPU time.
3. A watcher process (this file, ``--watchers``) opens ``--streams`` WatchEntries streams from
   index 0 over ten channels: ``--stalled`` of them are never read, the others read every
   message. Once each reading stream has caught up, the client plays ``--rounds`` rounds again.
4. Reported: median, p90 and p99 round latency with and without the streams and their ratio
   (the target: the median within 2x), server CPU per round, the server's resident memory
   before, with the streams, and at its peak (``VmHWM``), how far the reading streams were
   behind at the end, and how long a SIGTERM took to stop the server with every stream open.

The machine is shared and noisy: read the same-run ratio, and CPU per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import grpc
from bench_service import (
    BENCH_TABLE,
    DEFAULT_POSTGRES_URL,
    GNAU,
    ServerProcess,
    drop_postgres,
    free_port,
    scratch_postgres,
)
from gnau.v1 import audit_pb2, audit_pb2_grpc, round_pb2
from gnau_client import GnauClient

CHANNELS: Final = 10
TARGET_RATIO: Final = 2.0
SEATS: Final = [
    round_pb2.Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n) for n in range(1, 4)
]


# --- the watchers (a process of their own) --------------------------------------------------------


async def watch(target: str, token: str, streams: int, stalled: int) -> None:
    """Open the streams, say when the reading ones have caught up, report when told to stop."""
    metadata = (("authorization", f"Bearer {token}"),)
    channels = [grpc.aio.insecure_channel(target) for _ in range(CHANNELS)]
    last_index = [-1] * (streams - stalled)
    received = [0] * (streams - stalled)
    size = int(sys.stdin.readline())  # the log's size when the watchers start

    async def read(number: int) -> None:
        stub = audit_pb2_grpc.AuditServiceStub(channels[number % CHANNELS])
        call = stub.WatchEntries(audit_pb2.WatchEntriesRequest(start_index=0), metadata=metadata)
        async for message in call:
            received[number] += len(message.entries)
            last_index[number] = message.entries[-1].index

    held = []
    for number in range(stalled):  # opened, never read
        stub = audit_pb2_grpc.AuditServiceStub(channels[number % CHANNELS])
        held.append(
            stub.WatchEntries(audit_pb2.WatchEntriesRequest(start_index=0), metadata=metadata)
        )
    readers = [asyncio.ensure_future(read(number)) for number in range(streams - stalled)]
    while min(last_index) < size - 1:
        await asyncio.sleep(0.05)
    print("caught up", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    ended = [reader.done() for reader in readers]
    print(
        json.dumps(
            {
                "entries_received": sum(received),
                "lowest_last_index": min(last_index),
                "highest_last_index": max(last_index),
                "streams_ended": sum(ended),
            }
        ),
        flush=True,
    )
    for call in held:
        call.cancel()
    for reader in readers:
        reader.cancel()


# --- the run --------------------------------------------------------------------------------------


@dataclass
class Phase:
    latencies: list[float]
    cpu_per_round: float

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    def quantile(self, q: float) -> float:
        return statistics.quantiles(self.latencies, n=100)[int(q * 100) - 1]


def memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def play(client: GnauClient, server: ServerProcess, rounds: int, table: str) -> Phase:
    latencies = []
    client.put_table(table, BENCH_TABLE, timeout=30)  # a round is dealt at a catalogued table
    cpu_before = server.cpu_seconds()
    for _ in range(rounds):
        started = time.perf_counter()
        client.play_round(table, SEATS, timeout=30)
        latencies.append(time.perf_counter() - started)
    return Phase(latencies, (server.cpu_seconds() - cpu_before) / rounds)


@dataclass
class Result:
    label: str
    baseline: Phase
    streamed: Phase
    rss_before_kb: int
    rss_streams_kb: int
    peak_kb: int
    watchers: dict[str, int]
    log_size: int
    stop_seconds: float
    exit_status: int | None


async def bench_backend(
    label: str, database: str, directory: Path, arguments: argparse.Namespace
) -> Result:
    port = free_port()
    data_dir = directory / f"data-{label.lower()}"
    server = ServerProcess(
        f"gnau-{label.lower()}",
        [
            GNAU, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir),
            "--database", database, "--log-format", "json", "--reflection", "false",
            "--max-streams", str(arguments.streams + 10),
            "--max-streams-per-caller", str(arguments.streams + 10),
            "--max-calls-per-caller", str(2 * arguments.streams + 100),
            "--max-concurrent-rpcs", str(2 * arguments.streams + 100),
        ],
        directory,
    )  # fmt: skip
    await server.start()
    assert server.process is not None
    pid = server.process.pid
    token = (data_dir / "operator-token").read_text(encoding="utf-8").strip()
    target = f"127.0.0.1:{port}"
    with GnauClient(target, token=token) as client:
        play(client, server, 20, "warm-up")
        baseline = play(client, server, arguments.rounds, "baseline")
        rss_before = memory_kb(pid, "VmRSS")
        log_size = int(client.get_checkpoint().split("\n")[1])
        watchers = subprocess.Popen(
            [
                sys.executable, __file__, "--watchers", target, f"--token={token}",
                "--streams", str(arguments.streams), "--stalled", str(arguments.stalled),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert watchers.stdin is not None and watchers.stdout is not None
        watchers.stdin.write(f"{log_size}\n")
        watchers.stdin.flush()
        assert watchers.stdout.readline().strip() == "caught up"
        streamed = play(client, server, arguments.rounds, "streamed")
        rss_streams = memory_kb(pid, "VmRSS")
        peak = memory_kb(pid, "VmHWM")
        final_size = int(client.get_checkpoint().split("\n")[1])
    await asyncio.sleep(2 * 0.25)  # one watch interval and more: the readers catch up
    watchers.send_signal(signal.SIGTERM)
    report = json.loads(watchers.stdout.readline())
    report["behind_at_the_end"] = final_size - 1 - report["lowest_last_index"]
    # Stop the server with every stream still open (the watcher has not closed them yet).
    began = time.monotonic()
    status = server.stop()
    stop_seconds = time.monotonic() - began
    watchers.wait(timeout=30)
    return Result(
        label,
        baseline,
        streamed,
        rss_before,
        rss_streams,
        peak,
        report,
        final_size,
        stop_seconds,
        status,
    )


def report(result: Result, arguments: argparse.Namespace) -> None:
    base, streamed = result.baseline, result.streamed
    ratio = streamed.median / base.median
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(f"\n{result.label}: {arguments.rounds} rounds each way, {arguments.streams} streams "
          f"({arguments.stalled} never read)")  # fmt: skip
    for name, phase in (("no streams", base), ("streams open", streamed)):
        print(
            f"  {name:<13} median {phase.median * 1000:7.1f} ms  p90 "
            f"{phase.quantile(0.9) * 1000:7.1f} ms  p99 {phase.quantile(0.99) * 1000:7.1f} ms  "
            f"server CPU {phase.cpu_per_round * 1000:5.2f} ms/round"
        )
    print(f"  median ratio {ratio:.2f} (target at most {TARGET_RATIO:.0f}x: {verdict})")
    print(
        f"  server memory: {result.rss_before_kb / 1024:.0f} MiB before the streams, "
        f"{result.rss_streams_kb / 1024:.0f} MiB with them, peak {result.peak_kb / 1024:.0f} MiB"
    )
    watchers = result.watchers
    print(
        f"  reading streams: {watchers['entries_received']:,} entries received, the slowest "
        f"{watchers['behind_at_the_end']} behind the log's end ({result.log_size:,} entries)"
    )
    print(
        f"  SIGTERM with {arguments.streams} streams open: stopped in {result.stop_seconds:.2f} s,"
        f" exit status {result.exit_status}"
    )


async def run(arguments: argparse.Namespace) -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="gnau-bench-watch-") as scratch:
        directory = Path(scratch)
        results.append(
            await bench_backend(
                "SQLite", f"sqlite:///{directory / 'gnau.db'}", directory, arguments
            )
        )
        report(results[-1], arguments)
        if not arguments.skip_postgres:
            made = scratch_postgres(arguments.postgres)
            if isinstance(made, str):
                print(f"\nPostgreSQL skipped: {made}")
            else:
                name, url = made
                try:
                    results.append(await bench_backend("PostgreSQL", url, directory, arguments))
                    report(results[-1], arguments)
                finally:
                    drop_postgres(arguments.postgres, name)
    print("\n| backend | median no streams | median with streams | ratio | p99 with streams | "
          "CPU/round (no streams / streams) | server RSS before / with / peak |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for result in results:
        base, streamed = result.baseline, result.streamed
        print(
            f"| {result.label} | {base.median * 1000:.1f} ms | {streamed.median * 1000:.1f} ms | "
            f"{streamed.median / base.median:.2f} | {streamed.quantile(0.99) * 1000:.1f} ms | "
            f"{base.cpu_per_round * 1000:.2f} / {streamed.cpu_per_round * 1000:.2f} ms | "
            f"{result.rss_before_kb // 1024} / {result.rss_streams_kb // 1024} / "
            f"{result.peak_kb // 1024} MiB |"
        )
    return 0


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--stalled", type=int, default=100, help="streams never read")
    parser.add_argument("--rounds", type=int, default=300, help="rounds played each way")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES_URL, help="an admin URL")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--watchers", metavar="TARGET", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    if arguments.watchers:
        asyncio.run(
            watch(arguments.watchers, arguments.token, arguments.streams, arguments.stalled)
        )
        return
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    sys.exit(asyncio.run(run(arguments)))


if __name__ == "__main__":
    main()
