"""The tile client of ``tests/independent/tiles.py`` (written from docs/audit.md, *Tiles*) against
the code and a live service: the doc's worked examples are the code's paths, tiles and headers;
a tree's roots and proofs from tiles are the service's; and over HTTP every checkpoint the client
sees is recomputed from the tiles alone, every public bundle checked against the hash tiles."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from gnau.v1 import dealer_pb2

from gnau_service.audit import merkle
from gnau_service.audit import tiles as code
from gnau_service.server.http import routes
from gnau_service.server.process.app import running
from tests.independent.notes import Checkpoint, read_vkey
from tests.independent.tiles import (
    WIDTH,
    Seen,
    TreeTiles,
    check_tree,
    http_get,
    perfect_root,
    read_checkpoint,
    tile_path,
    tiles_of,
)
from tests.web.conftest import WebService, web_settings

AUDIT = (Path(__file__).parents[2] / "docs" / "audit.md").read_text(encoding="utf-8")


def doc_block(name: str) -> str:
    """What follows ``<!-- example: NAME -->`` in docs/audit.md, up to the next blank line
    after it (a table) or the end of its code block."""
    block = r"```\w+\n.*?```|(?:\|[^\n]*\n)+"
    match = re.search(rf"<!-- example: {name} -->\n({block})", AUDIT, re.DOTALL)
    assert match, f"docs/audit.md lost its example {name!r}"
    return match[1]


def doc_rows(name: str) -> list[list[str]]:
    lines = doc_block(name).strip().splitlines()[2:]
    return [[cell.strip().strip("`") for cell in line.strip("|").split("|")] for line in lines]


# -- the doc against the code ----------------------------------------------------------------------


def test_the_docs_tile_paths_are_the_codes() -> None:
    rows = doc_rows("tile-paths")
    assert len(rows) >= 6
    for level_text, index_text, width_text, path in rows:
        level = None if level_text == "entries" else int(level_text)
        index, width = int(index_text), int(width_text)
        assert tile_path(level, index, width) == path
        assert code.tile_path(level, index, width) == path
        assert code.parse_tile_path(path) == code.TileRef(level, index, width)


def test_the_docs_tiles_of_70000_are_the_codes() -> None:
    expected = {(lvl, n, w) for lvl, n, w in tiles_of(70_000)}
    assert expected == {(ref.level, ref.index, ref.width) for ref in code.tiles_of(70_000)}
    named = set()
    for level_text, hashes, listed in doc_rows("tiles-of-70000"):
        level = None if level_text == "entries" else int(level_text)
        if level is not None:
            assert int(hashes.replace(",", "")) == 70_000 // WIDTH**level
        paths = re.findall(r"tile/[\w/.]+", listed)
        ranged = "…" in listed  # first … last full tile, then the partial one
        refs = [code.parse_tile_path(path) for path in paths]
        if ranged:
            first, last, *rest = refs
            refs = [code.TileRef(level, n) for n in range(first.index, last.index + 1)] + rest
        named |= {(ref.level, ref.index, ref.width) for ref in refs}
    assert named == expected


def test_the_docs_headers_are_the_routes() -> None:
    lines = dict(line.split(": ", 1) for line in doc_block("tile-headers").splitlines()[1:-1])
    checkpoint, tile = code.CHECKPOINT_CACHE_CONTROL, code.TILE_CACHE_CONTROL
    assert lines["checkpoint"] == f"text/plain; charset=utf-8; Cache-Control: {checkpoint}"
    assert lines["tile"] == f"application/octet-stream; Cache-Control: {tile}"
    assert lines["refusal"] == f"{routes.JSON_CONTENT_TYPE}; Cache-Control: no-store"
    assert routes.TILES_PREFIX == "/log/" and "`GET /log/checkpoint`" in AUDIT


def memory_tiles(leaves: list[bytes]) -> dict[str, bytes]:
    """Every tile of every size up to ``len(leaves)`` a reader may ask for, from the leaves."""
    levels = [[merkle.leaf_hash(leaf) for leaf in leaves]]
    while len(levels[-1]) >= WIDTH:
        below = levels[-1]
        full = range(0, len(below) - WIDTH + 1, WIDTH)
        levels.append([perfect_root(below[i : i + WIDTH]) for i in full])
    files = {}
    for level, hashes in enumerate(levels):
        for n in range(-(-len(hashes) // WIDTH)):
            tile = hashes[n * WIDTH : (n + 1) * WIDTH]
            for width in range(1, len(tile) + 1):
                files[tile_path(level, n, width)] = b"".join(tile[:width])
    return files


def test_roots_and_proofs_from_tiles_are_the_codes() -> None:
    """The worked example's tree of 70,000 leaves: its root from the four tiles the doc names,
    and inclusion proofs, are what gnau_service.audit.merkle computes from the leaves."""
    leaves = [f"leaf {i}".encode() for i in range(70_000)]
    files = memory_tiles(leaves)
    read: list[str] = []

    def fetch(path: str) -> bytes:
        read.append(path)
        return files[path]

    tree = TreeTiles(70_000, fetch)
    memory = merkle.MemoryTree()
    for leaf in leaves:
        memory.append(merkle.leaf_hash(leaf))
    assert tree.root() == memory.root()
    assert sorted(read) == ["tile/0/273.p/112", "tile/1/001.p/17", "tile/2/000.p/1"]
    assert tree.leaf(69_999) == merkle.leaf_hash(leaves[69_999])
    for index in (0, 255, 256, 65_535, 65_536, 69_887, 69_999):
        assert tree.inclusion_proof(index) == memory.inclusion_proof(index, 70_000)
    for size in (1, 300, 65_536, 69_900):
        assert tree.root(size) == memory.root(size) == TreeTiles(size, fetch).root()
        assert tree.consistency_proof(size) == memory.consistency_proof(size, 70_000)


# -- a live service -------------------------------------------------------------------------------

LIVE = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def web_service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WebService]:
    """A service with its HTTP port, as tests/web's (its starter tables are enough here)."""
    settings = web_settings(tmp_path_factory.mktemp("tiles"))
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield WebService(app, channel)


def check_seen(prefix: str, seen: dict[int, Checkpoint], latest: Checkpoint) -> None:
    """The latest checkpoint from its tiles, its bundles entry by entry, and every checkpoint
    seen before it: from the tiles of its own widths (the port renders every width a signed
    checkpoint covers), and from the latest tree's (consistency)."""
    result = check_tree(prefix, latest)
    assert result.bundles_refused == 0  # every round here is settled
    assert sorted(result.entries) == list(range(latest.size))
    newer = TreeTiles(latest.size, lambda path: http_get(prefix + path)[2])
    for old in seen.values():
        check_tree(prefix, old, bundles=False)
        assert newer.root(old.size) == old.root, (old.size, latest.size)


async def play_and_check(service: WebService, rounds: int, *, batches: int) -> list[int]:
    """Plays ``rounds`` rounds in ``batches``, and after each checks the latest checkpoint and
    every one seen before it from the tiles alone; returns the sizes seen."""
    prefix = f"{service.base_url}log/"
    key = read_vkey(service.vkey)
    seen: dict[int, Checkpoint] = {}
    for _ in range(batches):
        for _ in range(rounds // batches):
            await service.play()
        latest = await asyncio.to_thread(read_checkpoint, prefix, key.name, [key])
        await asyncio.to_thread(check_seen, prefix, seen, latest)
        seen[latest.size] = latest
    return sorted(seen)


@LIVE
async def test_a_client_from_the_docs_reads_the_live_log(web_service: WebService) -> None:
    sizes = await play_and_check(web_service, 4, batches=2)
    assert sizes[-1] < WIDTH


@LIVE
async def test_an_unrevealed_round_keeps_its_bundle_private(web_service: WebService) -> None:
    prefix = f"{web_service.base_url}log/"
    key = read_vkey(web_service.vkey)

    def read() -> Seen:
        return check_tree(prefix, read_checkpoint(prefix, key.name, [key]))

    round_id = await web_service.play("table-2", until="Deal")
    seen = await asyncio.to_thread(read)
    assert seen.bundles_refused == 1  # the last: it holds the dealt round
    reveal = dealer_pb2.RevealRequest(request_id=str(uuid.uuid4()), round_id=round_id)
    await web_service.call("Reveal", reveal)
    seen = await asyncio.to_thread(read)
    assert seen.bundles_refused == 0
    assert any(round_id.encode() in entry for entry in seen.entries.values())
    settle = dealer_pb2.SettleRequest(request_id=str(uuid.uuid4()), round_id=round_id)
    await web_service.call("Settle", settle)


@LIVE
async def test_a_client_from_the_docs_reads_a_log_of_several_tiles(
    web_service: WebService,
) -> None:
    """Past 256 entries: a full level-0 tile, a full bundle and a level-1 tile, and partial
    tiles on both levels, recomputed at every checkpoint seen on the way (a second or so)."""
    sizes = await play_and_check(web_service, 72, batches=6)
    assert sizes[-1] > WIDTH and any(size < WIDTH for size in sizes)
