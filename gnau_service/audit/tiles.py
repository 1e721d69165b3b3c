"""The log as static tiles: C2SP tlog-tiles (https://c2sp.org/tlog-tiles), pure.

A log of ``size`` entries is published as immutable files that any client checks against a
signed checkpoint:

- ``checkpoint``: the latest signed checkpoint (the only file that changes);
- ``tile/<L>/<N>``: 256 hashes of 32 bytes, hash ``i`` being the Merkle tree hash of leaves
  ``[(N*256 + i) * 256**L, (N*256 + i + 1) * 256**L)``, so level 0 holds the leaf hashes and
  level ``L`` the complete subtrees of ``2**(8*L)`` leaves;
- ``tile/<L>/<N>.p/<W>``: a *partial* tile, its first ``W`` (1 to 255) hashes, for a tree whose
  size ends inside it: the width at level ``L`` of a tree of ``size`` entries is
  ``size // 256**L % 256``;
- ``tile/entries/<N>[.p/<W>]``: the entries of leaves ``N*256`` to ``N*256 + W - 1``, each a
  big-endian uint16 length and then its stored bytes, so no entry is over
  :data:`MAX_ENTRY_BYTES`.

``N`` is written in groups of three digits, every group but the last prefixed with ``x``
(1234067 is ``x001/x234/067``). Storage is not this module's business: a store renders tiles
(:mod:`gnau_service.store.tiles`), and a client reads them through :class:`TileNodes`, a
:class:`~gnau_service.audit.merkle.NodeReader` that turns tiles into every root and proof.

>>> tile_path(0, 1234067)
'tile/0/x001/x234/067'
>>> tile_path(None, 5, 7)
'tile/entries/005.p/7'
>>> parse_tile_path("tile/1/x001/000.p/255")
TileRef(level=1, index=1000, width=255)
>>> [str(ref) for ref in tiles_of(65_536, since=65_535)]
['tile/0/255', 'tile/1/000', 'tile/2/000.p/1', 'tile/entries/255']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.audit.entries import MAX_ENTRY_BYTES
from gnau_service.audit.merkle import HASH_SIZE, root_of

#: Hashes in a full tile, and entries in a full bundle.
TILE_WIDTH: Final = 256
#: Tree levels a tile spans: level ``L`` of the tiles is level ``8*L`` of the tree.
TILE_HEIGHT: Final = 8
#: The largest tile level (2**(8*L) leaves a hash): beyond any log of 2**53 entries.
MAX_TILE_LEVEL: Final = 7
#: The level a bundle is named by in paths.
ENTRIES: Final = "entries"
#: The path of the checkpoint, beside ``tile/``.
CHECKPOINT_PATH: Final = "checkpoint"
#: How the checkpoint is served (the HTTP port, a bucket): it changes with every batch, so a
#: cache holds it for seconds only.
CHECKPOINT_CONTENT_TYPE: Final = "text/plain; charset=utf-8"
CHECKPOINT_CACHE_CONTROL: Final = "public, max-age=2"
#: How a tile is served: its bytes never change, for any width (as Tessera serves them).
TILE_CONTENT_TYPE: Final = "application/octet-stream"
TILE_CACHE_CONTROL: Final = "public, max-age=604800, immutable"

_GROUP: Final = re.compile(r"x\d{3}")
_LAST_GROUP: Final = re.compile(r"\d{3}")
_WIDTH: Final = re.compile(r"[1-9]\d{0,2}")
_LEVEL: Final = re.compile(r"\d")
#: Groups in the longest index path (a level-0 tile index of a 2**53-entry log has 14 digits).
_MAX_GROUPS: Final = 6


class TileError(ValueError):
    """A tile path that is not a tile of this format, or tile bytes that are malformed."""


@dataclass(frozen=True, order=True)
class TileRef:
    """One tile: its ``level`` (None for an entry bundle), ``index`` and ``width`` (256: full)."""

    level: int | None
    index: int
    width: int = TILE_WIDTH

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    @property
    def first_leaf(self) -> int:
        """The first leaf this tile covers (its first entry, for a bundle)."""
        return self.index * TILE_WIDTH * _leaves_per_hash(self.level)

    @property
    def end_leaf(self) -> int:
        """One past the last leaf this tile covers: the smallest tree it belongs to."""
        return (self.index * TILE_WIDTH + self.width) * _leaves_per_hash(self.level)

    def __str__(self) -> str:
        return tile_path(self.level, self.index, self.width)


def _leaves_per_hash(level: int | None) -> int:
    """The leaves under one hash of a tile at ``level`` (a bundle's: one entry each)."""
    return 1 << (TILE_HEIGHT * (level or 0))


def tile_path(level: int | None, index: int, width: int = TILE_WIDTH) -> str:
    """The path of a tile (``level`` None: an entry bundle), relative to the log's prefix."""
    if not (0 < width <= TILE_WIDTH) or index < 0:
        raise TileError(f"no tile has index {index} and width {width}")
    digits = f"{index:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join([*(f"x{group}" for group in groups[:-1]), groups[-1]])
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{ENTRIES if level is None else level}/{name}{suffix}"


def parse_tile_path(path: str) -> TileRef:
    """The tile a path names, exactly as :func:`tile_path` writes it, or :class:`TileError`.

    Only the one spelling is accepted (no leading zeros in a width, no group out of place), so a
    tile has one path, and a cache one key.
    """
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile" or len(parts) > 3 + _MAX_GROUPS:
        raise TileError("not a tile path")
    level_text, *groups = parts[1:]
    level: int | None
    if level_text == ENTRIES:
        level = None
    elif _LEVEL.fullmatch(level_text) and int(level_text) <= MAX_TILE_LEVEL:
        level = int(level_text)
    else:
        raise TileError(f"a tile level is 0 to {MAX_TILE_LEVEL} or {ENTRIES!r}")
    width = TILE_WIDTH
    if len(groups) >= 2 and groups[-2].endswith(".p"):
        if not _WIDTH.fullmatch(groups[-1]) or int(groups[-1]) >= TILE_WIDTH:
            raise TileError("a partial tile's width is 1 to 255, without leading zeros")
        width = int(groups[-1])
        groups = [*groups[:-2], groups[-2].removesuffix(".p")]
    if not 0 < len(groups) <= _MAX_GROUPS or not _LAST_GROUP.fullmatch(groups[-1]):
        raise TileError("a tile index ends in a group of three digits")
    if not all(_GROUP.fullmatch(group) for group in groups[:-1]):
        raise TileError("every group of a tile index but the last is x and three digits")
    index = int("".join(group.removeprefix("x") for group in groups))
    if path != tile_path(level, index, width):
        raise TileError("a tile index has no leading zero groups")
    return TileRef(level, index, width)


def tile_width(size: int, level: int | None, index: int) -> int:
    """The width of tile ``index`` at ``level`` in a tree of ``size`` entries: 256 if it is
    full, 0 if the tree does not reach it."""
    complete = size // _leaves_per_hash(level)  # the hashes of this level the tree holds
    return max(0, min(TILE_WIDTH, complete - index * TILE_WIDTH))


def tiles_of(size: int, since: int = 0) -> Iterator[TileRef]:
    """Every tile of a tree of ``size`` entries that a tree of ``since`` entries lacks (the
    full tiles and the one partial tile of each level, then the bundles), level by level."""
    for level in [*range(MAX_TILE_LEVEL + 1), None]:
        hashes, before = (size // _leaves_per_hash(level), since // _leaves_per_hash(level))
        if hashes == 0:
            continue
        first = before // TILE_WIDTH if hashes > before else hashes // TILE_WIDTH
        for index in range(first, (hashes - 1) // TILE_WIDTH + 1):
            width = tile_width(size, level, index)
            if index * TILE_WIDTH + width > before:
                yield TileRef(level, index, width)


# --- Tile bytes -----------------------------------------------------------------------------------


def split_hashes(data: bytes, width: int) -> list[bytes]:
    """The hashes of a tile's bytes, which must be exactly ``width`` hashes."""
    if len(data) != width * HASH_SIZE:
        raise TileError(f"a tile of width {width} is {width * HASH_SIZE} bytes, not {len(data)}")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def encode_bundle(entries: Iterable[bytes]) -> bytes:
    """An entry bundle: each entry as a big-endian uint16 length, then its bytes."""
    parts: list[bytes] = []
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileError(f"an entry of {len(entry)} bytes does not fit a bundle")
        parts += (len(entry).to_bytes(2, "big"), entry)
    return b"".join(parts)


def decode_bundle(data: bytes, width: int) -> list[bytes]:
    """The entries of a bundle, which must hold exactly ``width`` of them and nothing more."""
    entries: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 2 > len(data):
            raise TileError(f"a bundle ends inside the length of entry {len(entries)}")
        length = int.from_bytes(data[offset : offset + 2], "big")
        end = offset + 2 + length
        if end > len(data):
            raise TileError(f"a bundle ends inside entry {len(entries)}")
        entries.append(data[offset + 2 : end])
        offset = end
    if len(entries) != width:
        raise TileError(f"a bundle of width {width} holds {len(entries)} entries")
    return entries


# --- Reading a tree through its tiles -------------------------------------------------------------

#: Fetches the hashes of one tile: the reader asks for the width the tree's size gives it.
TileFetch = Callable[[TileRef], Sequence[bytes]]


class TileNodes:
    """The complete subtrees of a tree of ``size`` entries, read from its hash tiles: a
    :class:`~gnau_service.audit.merkle.NodeReader`, so ``root_from_reader``, ``inclusion_proof``
    and ``consistency_proof`` work on tiles unchanged.

    A node at tree level ``8*L + r`` is the Merkle tree hash of ``2**r`` consecutive hashes of a
    tile at level ``L``. Each tile is fetched once, at the width the tree gives it.
    """

    def __init__(self, size: int, fetch: TileFetch) -> None:
        self.size = size
        self._fetch = fetch
        self._tiles: dict[TileRef, Sequence[bytes]] = {}

    def node(self, level: int, index: int) -> bytes:
        tile_level, height = divmod(level, TILE_HEIGHT)
        first = index << height  # the node's first hash at the tile level
        tile_index, offset = divmod(first, TILE_WIDTH)
        width = tile_width(self.size, tile_level, tile_index)
        if offset + (1 << height) > width:
            raise LookupError(f"node ({level}, {index}) is not complete in a tree of {self.size}")
        hashes = self.hashes(TileRef(tile_level, tile_index, width))
        return root_of(hashes[offset : offset + (1 << height)])

    def hashes(self, ref: TileRef) -> Sequence[bytes]:
        """The hashes of one tile, fetched once and checked to be ``ref.width`` hashes."""
        found = self._tiles.get(ref)
        if found is None:
            found = self._fetch(ref)
            if len(found) != ref.width or any(len(item) != HASH_SIZE for item in found):
                raise TileError(f"{ref} does not hold {ref.width} hashes of {HASH_SIZE} bytes")
            self._tiles[ref] = found
        return found
