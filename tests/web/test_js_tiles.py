"""The page's tile reader (``tiles.js``) against the log's own: the paths and widths of every
tile of trees up to 70,000 entries are ``gnau_service.audit.tiles``'s, and the roots it
recomputes from tiles, and the leaves it reads, are ``MemoryTree``'s; a changed hash or a short
tile is a mismatch."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnau_service.audit.merkle import MemoryTree, leaf_hash
from gnau_service.audit.tiles import TILE_WIDTH, tile_path, tile_width, tiles_of
from tests.web.nodejs import run_module_script

# make test-system: the page's JavaScript, run by Node.js.
pytestmark = pytest.mark.system

TILES_MODULE = Path(__file__).parents[2] / "gnau_service" / "web" / "js" / "tiles.js"
LEAVES = 70_000
SIZES = [1, 2, 5, 255, 256, 257, 300, 511, 512, 4_097, 65_535, 65_536, 65_537, 69_999, LEAVES]

CHECK = """
import { TileMismatch, checkAgainstTiles, tilePath, tileWidth } from %s;
const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { tiles, cases, paths } = JSON.parse(input);
const files = new Map(Object.entries(tiles).map(([path, data]) => [path, bytes(data)]));
const answers = { paths: paths.map(([l, n, w]) => tilePath(l, n, w)), widths: [], verdicts: [] };
for (const c of cases) {
  answers.widths.push([0, 1, 2].map((level) => tileWidth(BigInt(c.size), level, 0n)));
  const fetchTile = async (path) => {
    const data = files.get(path);
    if (!data) throw new Error(`no ${path}`);
    if (c.corrupt !== path) return data;
    const changed = data.slice(c.short ? 32 : 0);
    changed[changed.length - 1] ^= 1;
    return changed;
  };
  const leaves = c.leaves.map(([index, entry]) => ({ index, bytes: bytes(entry) }));
  try {
    await checkAgainstTiles({ size: BigInt(c.size), root: bytes(c.root), leaves }, fetchTile);
    answers.verdicts.push("ok");
  } catch (error) {
    if (!(error instanceof TileMismatch)) throw error;
    answers.verdicts.push("mismatch");
  }
}
process.stdout.write(JSON.stringify(answers));
"""


def test_the_pages_tile_reader_agrees_with_the_log() -> None:
    entries = [f"entry {n}".encode() for n in range(LEAVES)]
    tree = MemoryTree()
    for entry in entries:
        tree.append(leaf_hash(entry))
    # Every tile any of SIZES reads, at the width that size gives it: level by level.
    tiles: dict[str, str] = {}
    for size in SIZES:
        for ref in tiles_of(size):
            if ref.level is None:
                continue
            first = ref.index * TILE_WIDTH
            hashes = [tree.node(8 * ref.level, first + i) for i in range(ref.width)]
            tiles[str(ref)] = b"".join(hashes).hex()
    cases: list[dict[str, object]] = []
    expected: list[str] = []
    for size in SIZES:
        last = size - 1
        leaves = [[i, entries[i].hex()] for i in sorted({0, last // 2, last})]
        good = {"size": size, "root": tree.root(size).hex(), "leaves": leaves}
        level0 = tile_path(0, last // TILE_WIDTH, size % TILE_WIDTH or TILE_WIDTH)
        cases += [good, {**good, "corrupt": level0}, {**good, "corrupt": level0, "short": True}]
        expected += ["ok", "mismatch", "mismatch"]
        if (size // TILE_WIDTH) % TILE_WIDTH:  # the root reads the last level-1 tile
            index = (size // TILE_WIDTH - 1) // TILE_WIDTH
            level1 = tile_path(1, index, tile_width(size, 1, index))
            cases.append({**good, "corrupt": level1})
            expected.append("mismatch")
        if size >= TILE_WIDTH**2:  # and the level-2 tile, for the first 65,536 leaves
            cases.append({**good, "corrupt": tile_path(2, 0, 1)})
            expected.append("mismatch")
    wrong_leaf = {**cases[-1], "corrupt": None, "leaves": [[5, b"not entry 5".hex()]]}
    cases.append(wrong_leaf)
    expected.append("mismatch")
    refs = [ref for size in SIZES for ref in tiles_of(size)]
    paths = [[ref.level, ref.index, ref.width] for ref in refs]
    answers = run_module_script(CHECK % f'"{TILES_MODULE.as_uri()}"', {
        "tiles": tiles, "cases": cases, "paths": paths,
    })  # fmt: skip
    assert answers["paths"] == [str(ref) for ref in refs]
    assert answers["widths"] == [
        [tile_width(int(str(c["size"])), lvl, 0) for lvl in range(3)] for c in cases
    ]
    assert answers["verdicts"] == expected
