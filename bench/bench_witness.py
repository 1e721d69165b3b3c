"""What a witness costs: cosignatures per second and CPU per add-checkpoint.

Run: ``.venv/bin/python bench/bench_witness.py [--checkpoints N]`` (about half a minute).

Every submission is real: the log grows by one leaf, signs the new checkpoint, and sends it with
the consistency proof from the previous one. Three measurements, same run:

1. the crypto floor: one Ed25519 verification (the log's signature) and one signature (the
   cosignature), which any witness must do per checkpoint: the baseline;
2. the whole check in-process (parse, verify, consistency proof, one SQLite transaction with
   ``synchronous = FULL``, cosign), without HTTP;
3. ``gnau witness serve`` as its own process, over HTTP with keep-alive, one request at a time
   and 8 at a time; its CPU is read from /proc, so the client's is not counted.

Compare the ratios to the floor, not the absolute rates: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnau_service.audit.cosignature import WitnessSigner, cosign
from gnau_service.witness.logs import parse_logs
from gnau_service.witness.server import Witness, handle_add_checkpoint
from gnau_service.witness.state import WitnessState
from tests.witnessing import GrowingLog, witness_process, write_logs_toml

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def bodies(log: GrowingLog, start: int, count: int) -> list[bytes]:
    """``count`` add-checkpoint bodies, each one leaf past the one before, from ``start``."""
    log.grow(count)
    return [log.request(size - 1, size) for size in range(start + 1, start + count + 1)]


def per_second(action: Callable[[], object], count: int) -> tuple[float, float]:
    """(operations per second, CPU microseconds per operation) of this process."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        action()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return count / wall, cpu / count * 1e6


def crypto_floor(log: GrowingLog, signer: WitnessSigner, count: int) -> tuple[float, float]:
    note = log.checkpoint()
    message, signature = note.text.encode(), note.signatures[0].signature
    verifier = log.signer.verifier

    def both() -> None:
        verifier.verify(message, signature)
        cosign(signer, note.text, 1_700_000_000)

    return per_second(both, count)


def in_process(directory: Path, count: int) -> tuple[float, float]:
    log = GrowingLog.new("gnau-dealer/bench")
    witness = Witness(
        WitnessSigner.generate("witness.example/bench"),
        parse_logs(write_logs_toml(directory / "in.toml", {log.origin: [log.vkey]}).read_text()),
        WitnessState(directory / "in-process.db"),
        lambda: datetime.now(UTC),
    )
    requests = bodies(log, 0, count)

    async def submit_all() -> None:
        for body in requests:
            response = await handle_add_checkpoint(witness, body)
            assert response.status == 200, response.text

    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(submit_all())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return count / wall, cpu / count * 1e6


def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


async def sequential(url: str, requests: list[bytes]) -> None:
    """Send ``requests`` one after another on one keep-alive connection; each must be cosigned."""
    async with aiohttp.ClientSession() as session:
        for body in requests:
            async with session.post(url, data=body) as response:
                await response.read()
                assert response.status == 200, response.status


async def racing(url: str, log: GrowingLog, batches: int, width: int) -> None:
    """``batches`` rounds of ``width`` submissions at once, all from the witness's size: one per
    round is cosigned, the others get 409, as when several log replicas submit together."""
    connector = aiohttp.TCPConnector(limit=width)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send(body: bytes) -> int:
            async with session.post(url, data=body) as response:
                await response.read()
                return response.status

        size = log.tree.size
        log.grow(batches * width)
        for _ in range(batches):
            sizes = [size + step for step in range(1, width + 1)]
            statuses = await asyncio.gather(*(send(log.request(size, new)) for new in sizes))
            assert statuses.count(200) == 1, statuses
            size = sizes[statuses.index(200)]


def served(directory: Path, count: int) -> list[tuple[str, float, float]]:
    log = GrowingLog.new("gnau-dealer/bench")
    logs = write_logs_toml(directory / "logs.toml", {log.origin: [log.vkey]})
    width = 8
    runs: list[tuple[str, int, Callable[[str], Coroutine[Any, Any, None]]]] = [
        ("HTTP, 1 at a time", count, lambda url: sequential(url, bodies(log, 0, count))),
        (
            f"HTTP, {width} racing (1 cosigned, {width - 1} refused 409)",
            count // width * width,
            lambda url: racing(url, log, count // width, width),
        ),
    ]
    results = []
    with witness_process(directory / "served", logs) as witness:
        pid = witness.process.pid
        for label, requests, run in runs:
            cpu, wall = process_cpu_seconds(pid), time.perf_counter()
            asyncio.run(run(witness.add_checkpoint_url))
            wall, cpu = time.perf_counter() - wall, process_cpu_seconds(pid) - cpu
            results.append((label, requests / wall, cpu / requests * 1e6))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=400, help="submissions per measurement")
    args = parser.parse_args()
    count = args.checkpoints
    # The in-process witness logs each cosignature; the served one writes to its own stderr.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        floor_rate, floor_cpu = crypto_floor(
            GrowingLog.new(size=10), WitnessSigner.generate("w.example/w"), count * 5
        )
        rows = [("crypto floor: 1 Ed25519 verify + 1 sign (baseline)", floor_rate, floor_cpu)]
        rows.append(
            (
                "in-process: parse, verify, proof, SQLite commit, cosign",
                *in_process(directory, count),
            )
        )
        rows += served(directory, count)
    print("| what | requests/s | CPU µs per request | CPU / floor |")
    print("| --- | ---: | ---: | ---: |")
    for label, rate, cpu in rows:
        print(f"| {label} | {rate:,.0f} | {cpu:,.0f} | {cpu / floor_cpu:.1f} |")


if __name__ == "__main__":
    main()
