"""What metrics (and tracing) cost the server: its CPU per round with them off and on, in the
same run, on the same server code.

Run: ``.venv/bin/python bench/bench_metrics.py`` (about a minute with the defaults).

1. Three ``gnau serve`` processes start at once, each on a fresh SQLite file: metrics and
   tracing off (no HTTP or metrics port: the interceptor has no observer); metrics on
   (``--metrics-listen``); metrics on and tracing on (``--tracing console``, the spans written
   to a file, so every span is made and exported).
2. One client plays whole rounds (Shuffle, Deal, Reveal, Settle: four calls, four durable log
   entries) against each in turn, ``--rounds`` at a time, ``--trials`` times, so that the
   machine's noise falls on every server alike. Each server's CPU time (user + system, every
   thread, from /proc) is read before and after each batch: the figure is CPU per round, the
   median of the trials.
3. A scrape's own cost: ``--scrapes`` scrapes of ``/metrics`` on the metrics server, its CPU
   per scrape (Prometheus scrapes every 15 s or so; a round takes milliseconds).
4. The metrics' own work, alone and exactly: what the interceptor's observer does per call
   (started, the duration, handled) and the store's observer per batch, timed in this process
   over ``--observations`` calls, beside an empty loop; its share of the server's CPU per call
   (step 2, off) is the metrics' cost, below the noise of step 2.

The machine is shared and noisy: compare the ratios, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
from bench_service import BENCH_TABLE, GNAU, ServerProcess, free_port
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau.v1 import round_pb2
from gnau_client import GnauClient

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.server.grpc.call_observer import CallName, RpcType
from gnau_service.server.process.metrics import Metrics
from gnau_service.store import open_store
from gnau_service.store.batches import CommittedBatch

SEATS: Final = [
    round_pb2.Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n) for n in range(1, 4)
]
MODES: Final = {
    "off": [],
    "metrics": ["--metrics-listen", "127.0.0.1:{metrics_port}"],
    "metrics+tracing": ["--metrics-listen", "127.0.0.1:{metrics_port}", "--tracing", "console"],
}


@dataclass
class Served:
    mode: str
    server: ServerProcess
    target: str
    token: str
    metrics_port: int
    cpu_per_round: list[float] = field(default_factory=list)


async def start(mode: str, directory: Path) -> Served:
    port, metrics_port = free_port(), free_port()
    data_dir = directory / f"data-{mode}"
    extra = [part.format(metrics_port=metrics_port) for part in MODES[mode]]
    server = ServerProcess(
        f"gnau-{mode}",
        [
            GNAU, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir),
            "--log-format", "json", "--reflection", "false", *extra,
        ],
        directory,
    )  # fmt: skip
    await server.start()
    token = (data_dir / "operator-token").read_text(encoding="utf-8").strip()
    return Served(mode, server, f"127.0.0.1:{port}", token, metrics_port)


def play(served: Served, client: GnauClient, rounds: int, table: str) -> float:
    """CPU seconds of the server per round, over ``rounds`` rounds."""
    before = served.server.cpu_seconds()
    client.put_table(table, BENCH_TABLE, timeout=30)  # a round is dealt at a catalogued table
    for _ in range(rounds):
        client.play_round(table, SEATS, timeout=30)
    return (served.server.cpu_seconds() - before) / rounds


def observer_cpu(observations: int, directory: Path) -> tuple[float, float]:
    """CPU seconds per call of the metrics' call observer, and per batch of the store observer
    (one unit, one entry), each less an empty loop's."""
    signer = LogSigner.from_private_key("gnau-dealer/bench", Ed25519PrivateKey.generate())
    store = open_store(f"sqlite:///{directory / 'observer.db'}", signer)
    metrics = Metrics(
        store,
        streams_open=lambda: 0,
        streams_limit=500,
        storage_failing=lambda: False,
        serving=lambda: True,
    )
    call = CallName.of("/gnau.v1.DealerService/Shuffle", RpcType.UNARY)
    batch = CommittedBatch(1, (EntryKind.ROUND_DEALT,), 10, 0.001, 0.0005)
    context: Any = None  # the metrics observer does not read it
    ok = grpc.StatusCode.OK

    def timed(step: Callable[[], object]) -> float:
        started = time.process_time()
        for _ in range(observations):
            step()
        return (time.process_time() - started) / observations

    empty = timed(lambda: None)
    per_call = timed(lambda: metrics.start(call, context).end(ok, "")) - empty
    per_batch = timed(lambda: metrics.batch_committed(batch)) - empty
    store.close()
    return per_call, per_batch


def scrape_cpu(served: Served, scrapes: int) -> tuple[float, int]:
    """CPU seconds of the server per scrape of /metrics, and the exposition's size in bytes."""
    url = f"http://127.0.0.1:{served.metrics_port}/metrics"
    before = served.server.cpu_seconds()
    size = 0
    for _ in range(scrapes):
        with urllib.request.urlopen(url, timeout=30) as response:
            size = len(response.read())
    return (served.server.cpu_seconds() - before) / scrapes, size


async def run(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="gnau-bench-metrics-") as scratch:
        directory = Path(scratch)
        servers = [await start(mode, directory) for mode in MODES]
        try:
            clients = {s.mode: GnauClient(s.target, token=s.token) for s in servers}
            for served in servers:
                play(served, clients[served.mode], 20, "warm-up")
            for trial in range(arguments.trials):
                for served in servers:
                    cpu = play(served, clients[served.mode], arguments.rounds, f"t{trial}")
                    served.cpu_per_round.append(cpu)
            per_scrape, size = scrape_cpu(servers[1], arguments.scrapes)
            for client in clients.values():
                client.close()
        finally:
            statuses = [served.server.stop() for served in servers]
        per_call, per_batch = observer_cpu(arguments.observations, directory)
    if any(status not in (0, None) for status in statuses):
        print(f"a server did not stop cleanly: {statuses}", file=sys.stderr)
        return 1
    report(servers, per_scrape, size, (per_call, per_batch), arguments)
    return 0


def report(
    servers: list[Served],
    per_scrape: float,
    size: int,
    observers: tuple[float, float],
    arguments: argparse.Namespace,
) -> None:
    medians = {s.mode: statistics.median(s.cpu_per_round) for s in servers}
    off = medians["off"]
    print(
        f"\nServer CPU per round (4 calls), median of {arguments.trials} trials of "
        f"{arguments.rounds} rounds, one client, SQLite:\n"
    )
    print("| server | CPU per round | per call | vs off |")
    print("| --- | --- | --- | --- |")
    for mode, cpu in medians.items():
        print(f"| {mode} | {cpu * 1000:.2f} ms | {cpu * 250:.3f} ms | {cpu / off:.3f}x |")
    per_call, per_batch = observers
    server_call = off / 4
    print(
        f"\nThe metrics' own work: {per_call * 1e6:.1f} µs per call, {per_batch * 1e6:.1f} µs "
        f"per batch (of {arguments.observations:,} each); a round's four calls and (at most) "
        f"four batches: {(per_call + per_batch) * 4e6:.1f} µs, "
        f"{(per_call + per_batch) * 4 / off:.2%} of the server's CPU per round with metrics off "
        f"({server_call * 1e3:.2f} ms per call)."
    )
    print(
        f"\nOne scrape of /metrics: {per_scrape * 1000:.2f} ms of server CPU "
        f"({size} bytes; the mean of {arguments.scrapes} scrapes)."
    )


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds per batch")
    parser.add_argument("--trials", type=int, default=7, help="batches per server")
    parser.add_argument("--scrapes", type=int, default=100, help="scrapes of /metrics")
    parser.add_argument(
        "--observations", type=int, default=200_000, help="calls timed for the observer alone"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(asyncio.run(run(parse_arguments(argv))))


if __name__ == "__main__":
    main()
