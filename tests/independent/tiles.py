"""A C2SP tlog-tiles client written from docs/audit.md, *Tiles*, alone: paths, widths, nodes
between tile levels, roots and proofs from tiles, entry bundles, and a log read over HTTP.

It trusts nothing it fetches: a checkpoint opens with the pinned key, every root is recomputed
from the hash tiles, and every bundle entry's leaf hash must be the level-0 tile's.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.independent.common import check
from tests.independent.merkle import EMPTY_ROOT, leaf_hash, node_hash
from tests.independent.notes import Checkpoint, Key, open_checkpoint

WIDTH = 256
HASH = 32


def tile_path(level: int | None, index: int, width: int = WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``, ``level`` None for ``tile/entries/...``: ``N`` padded to a
    multiple of three digits, every group of three but the last prefixed with ``x``."""
    check(index >= 0 and 0 < width <= WIDTH, "no such tile")
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join([*("x" + group for group in groups[:-1]), groups[-1]])
    return f"tile/{'entries' if level is None else level}/{name}" + (
        "" if width == WIDTH else f".p/{width}"
    )


def span(level: int) -> int:
    """Leaves under one hash of tile level ``level``: 256^L."""
    return 1 << (8 * level)


def tile_width(size: int, level: int, index: int) -> int:
    """``min(256, floor(size / 256^L) - 256*N)``, 0 when the tree does not reach the tile."""
    return max(0, min(WIDTH, size // span(level) - WIDTH * index))


def tiles_of(size: int) -> list[tuple[int | None, int, int]]:
    """Every (level, index, width) of a tree of ``size`` entries, then its bundles."""
    found: list[tuple[int | None, int, int]] = []
    level = 0
    while size // span(level):
        hashes = size // span(level)
        found += [(level, n, tile_width(size, level, n)) for n in range(-(-hashes // WIDTH))]
        level += 1
    return found + [(None, n, w) for (lvl, n, w) in found if lvl == 0]


def perfect_root(hashes: list[bytes]) -> bytes:
    """The Merkle tree hash of a power-of-two run of hashes: paired up until one is left."""
    check(hashes and len(hashes) & (len(hashes) - 1) == 0, "not a complete subtree")
    while len(hashes) > 1:
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


def read_bundle(data: bytes, width: int) -> list[bytes]:
    """A bundle's entries: each a big-endian uint16 length, then its bytes; exactly ``width``."""
    entries, offset = [], 0
    while offset < len(data):
        check(offset + 2 <= len(data), "a bundle ends inside a length")
        length = int.from_bytes(data[offset : offset + 2], "big")
        check(offset + 2 + length <= len(data), "a bundle ends inside an entry")
        entries.append(data[offset + 2 : offset + 2 + length])
        offset += 2 + length
    check(len(entries) == width, f"a bundle of width {width} holds {len(entries)} entries")
    return entries


Fetch = Callable[[str], bytes]


@dataclass
class TreeTiles:
    """The tree of ``size`` entries, read through its hash tiles (each fetched once)."""

    size: int
    fetch: Fetch
    tiles: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)

    def hashes(self, level: int, index: int) -> list[bytes]:
        """Tile (level, index) at the width this tree gives it."""
        if (level, index) not in self.tiles:
            width = tile_width(self.size, level, index)
            check(width > 0, f"a tree of {self.size} has no tile {level}/{index}")
            data = self.fetch(tile_path(level, index, width))
            check(len(data) == HASH * width, f"tile {level}/{index} is not {width} hashes")
            self.tiles[level, index] = [data[i : i + HASH] for i in range(0, len(data), HASH)]
        return self.tiles[level, index]

    def node(self, m: int, j: int) -> bytes:
        """Node (m, j): the root of leaves [j*2^m, (j+1)*2^m), from 2^r hashes of level L."""
        level, r = divmod(m, 8)
        first = j << r
        index, offset = divmod(first, WIDTH)
        hashes = self.hashes(level, index)
        check(offset + (1 << r) <= len(hashes), f"node ({m}, {j}) is not complete")
        return perfect_root(hashes[offset : offset + (1 << r)])

    def mth(self, a: int, b: int) -> bytes:
        """MTH(a, b) as docs/audit.md writes it: a node if aligned and complete, else split."""
        check(0 <= a < b <= self.size, "no such range")
        n = b - a
        if n & (n - 1) == 0 and a % n == 0:
            return self.node(n.bit_length() - 1, a // n)
        k = 1 << ((n - 1).bit_length() - 1)
        return node_hash(self.mth(a, a + k), self.mth(a + k, b))

    def root(self, size: int | None = None) -> bytes:
        """The root of the first ``size`` entries (this tree's by default)."""
        size = self.size if size is None else size
        return EMPTY_ROOT if size == 0 else self.mth(0, size)

    def leaf(self, index: int) -> bytes:
        return self.hashes(0, index // WIDTH)[index % WIDTH]

    def inclusion_proof(self, index: int) -> list[bytes]:
        """RFC 9162's PATH(index, D[0:size]), from the tiles."""
        return self._path(index, 0, self.size)

    def _path(self, m: int, a: int, b: int) -> list[bytes]:
        if b - a == 1:
            return []
        k = 1 << ((b - a - 1).bit_length() - 1)
        if m - a < k:
            return [*self._path(m, a, a + k), self.mth(a + k, b)]
        return [*self._path(m, a + k, b), self.mth(a, a + k)]

    def consistency_proof(self, old: int) -> list[bytes]:
        """RFC 9162's PROOF(old, D[0:size]), from the tiles."""
        check(0 < old <= self.size, "no consistency proof between these sizes")
        return self._subproof(old, 0, self.size, complete=True)

    def _subproof(self, m: int, a: int, b: int, *, complete: bool) -> list[bytes]:
        if m == b - a:
            return [] if complete else [self.mth(a, b)]
        k = 1 << ((b - a - 1).bit_length() - 1)
        if m <= k:
            return [*self._subproof(m, a, a + k, complete=complete), self.mth(a + k, b)]
        return [*self._subproof(m - k, a + k, b, complete=False), self.mth(a, a + k)]


# -- over HTTP ----------------------------------------------------------------------------------


def http_get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def http_fetch(prefix: str) -> Fetch:
    """Reads tiles under ``prefix`` (``http://HOST:PORT/log/``): anything but 200 fails."""

    def fetch(path: str) -> bytes:
        status, _, body = http_get(prefix + path)
        check(status == 200, f"{path}: HTTP {status}")
        return body

    return fetch


@dataclass
class Seen:
    """What a client made of one checkpoint: its tree, and the bundles it could read."""

    checkpoint: Checkpoint
    bundles_read: int = 0
    bundles_refused: int = 0
    entries: dict[int, bytes] = field(default_factory=dict)


def read_checkpoint(prefix: str, origin: str, keys: list[Key]) -> Checkpoint:
    status, _, body = http_get(prefix + "checkpoint")
    check(status == 200, f"checkpoint: HTTP {status}")
    return open_checkpoint(body.decode("utf-8"), origin, keys)


def check_tree(prefix: str, checkpoint: Checkpoint, *, bundles: bool = True) -> Seen:
    """The checkpoint's root recomputed from the tiles alone, every leaf hash read, and every
    bundle that is public checked entry by entry against the level-0 tile (a 403 is counted)."""
    tree = TreeTiles(checkpoint.size, http_fetch(prefix))
    check(tree.root() == checkpoint.root, f"the tiles give another root for {checkpoint.size}")
    for level, index, width in tiles_of(checkpoint.size):
        if level:  # each hash of level L is the root of a full tile of level L - 1
            for i, hashed in enumerate(tree.hashes(level, index)[:width]):
                below = tree.hashes(level - 1, index * WIDTH + i)
                check(perfect_root(below) == hashed, f"tile {level}/{index}: hash {i} is wrong")
    seen = Seen(checkpoint)
    if not bundles:
        return seen
    for level, index, width in tiles_of(checkpoint.size):
        if level is not None:
            continue
        status, _, body = http_get(prefix + tile_path(None, index, width))
        if status == 403:
            seen.bundles_refused += 1
            continue
        check(status == 200, f"bundle {index}: HTTP {status}")
        seen.bundles_read += 1
        for k, entry in enumerate(read_bundle(body, width)):
            position = index * WIDTH + k
            check(leaf_hash(entry) == tree.leaf(position), f"entry {position} is not its leaf")
            seen.entries[position] = entry
    return seen
