"""Serving the log's tiles from the HTTP port: requests per second for a hot tile.

Run: ``.venv/bin/python bench/bench_tile_serving.py [--rounds N] [--seconds S] [--connections C]
[--json PATH]`` (about half a minute with the defaults).

1. ``gnau serve`` (a fresh SQLite file, its page port on) runs in its own process; this process
   plays ``--rounds`` whole rounds through gRPC (Shuffle, Deal, Reveal, Settle), so the log has
   full tiles at level 0 and full bundles.
2. Then, for ``--seconds`` each, ``--connections`` kept-alive HTTP/1.1 connections GET one path
   as fast as the server answers: the page's ``index.html`` (the same-run baseline: bytes read
   once at start and answered from memory), ``/log/checkpoint``, the full hash tile
   ``/log/tile/0/000`` and the full bundle ``/log/tile/entries/000``. Every answer must be 200.

How to read it: requests per second and the server's CPU per request for each path, and the
ratio of each to the baseline's rate. A tile is one indexed range read of the store on a worker
thread, a check that a signed checkpoint covers it and (a bundle) that its rounds are public; a
CDN in front (``Cache-Control: immutable``) answers the repeats, so this is the origin's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
import grpc
from bench_http_edge import Server, dealer_serving
from bench_service import GNAU, Recorder, free_port, real_player

PATHS: Final = {
    "page file (baseline)": "/index.html",
    "checkpoint": "/log/checkpoint",
    "hash tile 0/000": "/log/tile/0/000",
    "bundle entries/000": "/log/tile/entries/000",
}
DESCRIPTORS: Final = 4096


@dataclass
class Rate:
    name: str
    path: str
    requests: int
    seconds: float
    cpu_seconds: float
    body_bytes: int

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_seconds * 1e6 / self.requests if self.requests else float("nan")


async def start(directory: Path) -> tuple[Server, dict[str, Any], int]:
    grpc_port, http_port = free_port(), free_port()
    data_dir = directory / "dealer-data"
    argv = [
        GNAU, "serve", "--listen", f"127.0.0.1:{grpc_port}", "--data-dir", str(data_dir),
        "--database", f"sqlite:///{directory / 'gnau.db'}", "--log-format", "json",
        "--reflection", "false", "--http-listen", f"127.0.0.1:{http_port}",
    ]  # fmt: skip
    server = Server.start("gnau-serve", argv, directory, DESCRIPTORS)
    serving = await server.wait_for(dealer_serving)
    serving["token"] = (data_dir / "operator-token").read_text(encoding="utf-8").strip()
    return server, serving, http_port


async def fill(target: str, token: str, rounds: int) -> None:
    """``rounds`` whole rounds on 8 tables at once."""
    async with grpc.aio.insecure_channel(target) as channel:
        play = real_player(channel, token, "tiles")
        recorder = Recorder()
        per_table = -(-rounds // 8)

        async def table(number: int) -> None:
            for _ in range(per_table):
                await play(number, recorder)

        await asyncio.gather(*(table(n) for n in range(8)))


async def hammer(
    server: Server, port: int, name: str, path: str, *, seconds: float, connections: int
) -> Rate:
    url = f"http://127.0.0.1:{port}{path}"
    count, body_bytes = 0, 0
    stop_at = 0.0

    async def connection(session: aiohttp.ClientSession) -> None:
        nonlocal count, body_bytes
        while time.monotonic() < stop_at:
            async with session.get(url) as answer:
                body = await answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"{path}: {answer.status} {body[:200]!r}")
                count += 1
                body_bytes = len(body)

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await connection_warm(session, url)
        cpu = server.cpu_seconds()
        started = time.monotonic()
        stop_at = started + seconds
        await asyncio.gather(*(connection(session) for _ in range(connections)))
        elapsed = time.monotonic() - started
        return Rate(name, path, count, elapsed, server.cpu_seconds() - cpu, body_bytes)


async def connection_warm(session: aiohttp.ClientSession, url: str) -> None:
    async with session.get(url) as answer:
        await answer.read()


def table(rates: Sequence[Rate]) -> list[str]:
    baseline = rates[0].per_second
    lines = [
        "| path | body bytes | requests/s | server CPU per request | rate against the page file |",
        "|---|---:|---:|---:|---:|",
    ]
    for rate in rates:
        lines.append(
            f"| `{rate.path}` | {rate.body_bytes:,} | {rate.per_second:,.0f} |"
            f" {rate.cpu_us_per_request:,.0f} µs | {rate.per_second / baseline:.2f}x |"
        )
    return lines


async def run(arguments: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-tile-serving-") as temporary:
        server, serving, http_port = await start(Path(temporary))
        try:
            await fill(f"127.0.0.1:{serving['port']}", serving["token"], arguments.rounds)
            rates = [
                await hammer(
                    server,
                    http_port,
                    name,
                    path,
                    seconds=arguments.seconds,
                    connections=arguments.connections,
                )
                for name, path in PATHS.items()
            ]
        finally:
            server.stop()
    print(
        f"{arguments.rounds} rounds logged; {arguments.connections} kept-alive connections, "
        f"{arguments.seconds:.0f} s a path"
    )
    print("\n".join(table(rates)))
    if arguments.json:
        Path(arguments.json).write_text(
            json.dumps([rate.__dict__ | {"per_second": rate.per_second} for rate in rates])
        )
    return 0


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="rounds to log first")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of load a path")
    parser.add_argument("--connections", type=int, default=16, help="kept-alive connections")
    parser.add_argument("--json", help="write the figures here as JSON too")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(run(parse_arguments(None))))
