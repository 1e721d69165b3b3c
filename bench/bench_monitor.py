"""``gnau audit monitor`` from a cold start: entries per second followed and verified through
the log's tiles, beside ``verify_bundle`` on the equivalent export, in the same run.

Run: ``.venv/bin/python bench/bench_monitor.py`` (30,000 entries: about 1.5 minutes on two cores
once the bundle is cached, half a minute more the first time); ``--entries 1000000`` is the
issue's target (both verifications run at the same 1,000-3,000 entries/s, most of it replaying
rounds, so about 15-30 minutes on two cores, and about 4 more the first time, to generate the
bundle). The log is ``bench_audit_log.py``'s: real
rounds (COMMITTED, DEALT, REVEALED, SETTLED) with a CONFIG_CHANGED every 250 rounds, generated
once and cached under the temp directory. Its tiles are written here by a code path of their own
(hashlib and the C2SP text, nothing of ``gnau_service.audit.tiles``): every full tile, each
level's partial tile for the last checkpoint's size, every bundle, and that checkpoint.

Timed, each from nothing (no state, a fresh process pool), interleaved ``--repeat`` times (the
best of each is reported: the machine is shared and noisy):

1. ``verify_bundle`` on the export (the baseline: what ``gnau audit verify`` does);
2. the monitor's one pass over the directory (``Monitor.step``);
3. with ``--http``, the same pass over HTTP, the directory served by ``http.server`` on loopback.

The ratio monitor / export is the figure to compare across runs and machines.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.note import Verifier
from gnau_service.tiles.client import open_tiles
from gnau_service.tiles.monitor import Monitor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audit_log import BundleInfo, cached_bundle

WIDTH = 256


def tile_name(level: int | str, index: int, width: int = WIDTH) -> str:
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join([*("x" + group for group in groups[:-1]), groups[-1]])
    return f"tile/{level}/{name}" + ("" if width == WIDTH else f".p/{width}")


def bundle_entries(path: Path) -> Iterator[bytes]:
    with path.open("rb") as lines:
        for line in lines:
            if line.startswith(b'{"entry"'):
                yield json.loads(line)["entry"].encode("utf-8")


def _write(directory: Path, name: str, data: bytes) -> None:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _subtree(hashes: list[bytes]) -> bytes:
    while len(hashes) > 1:
        hashes = [
            hashlib.sha256(b"\x01" + hashes[i] + hashes[i + 1]).digest()
            for i in range(0, len(hashes), 2)
        ]
    return hashes[0]


def write_tiles(info: BundleInfo, directory: Path) -> None:
    """The bundle's log as tiles of its size, streamed: bundles as entries come, then each
    level's tiles from the level below."""
    level: list[bytes] = []
    batch: list[bytes] = []
    for entry in bundle_entries(info.path):
        batch.append(entry)
        level.append(hashlib.sha256(b"\x00" + entry).digest())
        if len(batch) == WIDTH:
            number = (len(level) - 1) // WIDTH
            _write(directory, tile_name("entries", number), _bundle(batch))
            batch = []
    if batch:
        _write(directory, tile_name("entries", len(level) // WIDTH, len(batch)), _bundle(batch))
    if len(level) != info.entries:
        raise AssertionError(f"the bundle holds {len(level)} entries, not {info.entries}")
    number_of_level = 0
    while level:
        for start in range(0, len(level), WIDTH):
            row = level[start : start + WIDTH]
            name = tile_name(number_of_level, start // WIDTH, len(row))
            _write(directory, name, b"".join(row))
        level = [
            _subtree(level[start : start + WIDTH])
            for start in range(0, len(level) - WIDTH + 1, WIDTH)
        ]
        number_of_level += 1
    (directory / "checkpoint").write_text(info.last_checkpoint, encoding="utf-8")


def _bundle(entries: list[bytes]) -> bytes:
    return b"".join(len(entry).to_bytes(2, "big") + entry for entry in entries)


def timed_export(info: BundleInfo, key: Verifier, jobs: int | None) -> float:
    start = time.perf_counter()
    with info.path.open("rb") as lines:
        report = verify_bundle(lines, pinned_keys=[key], jobs=jobs)
    seconds = time.perf_counter() - start
    if not report.ok or report.entries != info.entries:
        raise AssertionError(f"the export does not verify: {report.summary()}")
    return seconds


def timed_monitor(location: str, info: BundleInfo, key: Verifier, jobs: int | None) -> float:
    client = open_tiles(location)
    start = time.perf_counter()
    result = Monitor(client, [key], jobs=jobs).step()
    seconds = time.perf_counter() - start
    if (result.size, result.verified) != (info.entries, info.entries):
        raise AssertionError(f"the monitor stopped at {result.verified:,} of {info.entries:,}")
    print(
        f"    {client.reads:,} files read, {client.bytes_read / 1e6:,.1f} MB; "
        f"{result.rounds_replayed:,} rounds replayed",
        flush=True,
    )
    return seconds


def served(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=30_000, help="log size (default 30,000)")
    parser.add_argument("--jobs", type=int, help="verifying processes (default: every core)")
    parser.add_argument("--http", action="store_true", help="also follow the tiles over HTTP")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each, interleaved; the best is reported"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gnau-bench-cache",
        help="where the generated bundle is cached (shared with bench_audit_log.py)",
    )
    arguments = parser.parse_args()
    print(
        f"Gnau Dealer monitor benchmark: {arguments.entries:,} entries, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}",
        flush=True,
    )
    info = cached_bundle(arguments.cache_dir, arguments.entries, os.cpu_count() or 1, False)
    key = Verifier.from_vkey(info.vkey)
    with tempfile.TemporaryDirectory(prefix="gnau-bench-tiles-") as scratch:
        directory = Path(scratch)
        start = time.perf_counter()
        write_tiles(info, directory)
        print(f"tiles written in {time.perf_counter() - start:,.1f} s", flush=True)
        rates: dict[str, float] = {}
        server, url = served(directory) if arguments.http else (None, "")
        try:
            for attempt in range(1, arguments.repeat + 1):
                runs = [("export", lambda: timed_export(info, key, arguments.jobs))]
                runs.append(
                    (
                        "tiles directory",
                        lambda: timed_monitor(str(directory), info, key, arguments.jobs),
                    )
                )
                if arguments.http:
                    runs.append(
                        ("tiles over HTTP", lambda: timed_monitor(url, info, key, arguments.jobs))
                    )
                for name, run in runs:
                    print(f"{attempt}. {name}", flush=True)
                    rate = info.entries / run()
                    print(f"    {rate:,.0f} entries/s", flush=True)
                    rates[name] = max(rate, rates.get(name, 0.0))
        finally:
            if server is not None:
                server.shutdown()
    print()
    print(f"best of {arguments.repeat} interleaved run(s) each:")
    print("| verification | entries/s | ratio to the export |")
    print("|---|---:|---:|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / rates['export']:.2f} |")


if __name__ == "__main__":
    main()
