"""C2SP tlog-tiles formats (gnau_service/audit/tiles.py): paths, widths, bundles, and roots and
proofs read through tiles. Expected values come from the spec's text and examples, or from an
in-memory tree built leaf by leaf, never from the code under test."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.merkle import (
    MemoryTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_from_reader,
)
from gnau_service.audit.tiles import (
    TileError,
    TileNodes,
    TileRef,
    decode_bundle,
    encode_bundle,
    parse_tile_path,
    split_hashes,
    tile_path,
    tiles_of,
)


@pytest.mark.parametrize(
    ("level", "index", "width", "path"),
    [
        (0, 1234067, 256, "tile/0/x001/x234/067"),  # the spec's example
        (0, 0, 256, "tile/0/000"),
        (1, 999, 17, "tile/1/999.p/17"),
        (2, 1000, 1, "tile/2/x001/000.p/1"),
        (None, 5, 255, "tile/entries/005.p/255"),
        (None, 10**12, 256, "tile/entries/x001/x000/x000/x000/000"),
    ],
)
def test_paths_are_written_as_the_spec_writes_them(
    level: int | None, index: int, width: int, path: str
) -> None:
    assert tile_path(level, index, width) == path
    assert parse_tile_path(path) == TileRef(level, index, width)


@given(
    st.one_of(st.none(), st.integers(0, 7)),
    st.integers(0, 2**45),
    st.integers(1, 256),
)
def test_every_tile_has_one_path_that_reads_back(level: int | None, index: int, width: int) -> None:
    assert parse_tile_path(tile_path(level, index, width)) == TileRef(level, index, width)


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/0", "tile/0/0000", "tile/0/x000/001", "tile/0/001/002", "tile/0/x1/002",
        "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/007", "tile/0/000.p", "tile/0/000.p/",
        "tile/8/000", "tile/-1/000", "tile/01/000", "tile/data/000", "tiles/0/000", "tile/0",
        "tile/entries/", "tile/0/000/", "/tile/0/000", "tile/0/00a", "tile/0/x001/x002",
        "tile/0/x001/x002/x003/x004/x005/x006/007",
    ],
)  # fmt: skip
def test_a_path_of_another_spelling_is_refused(path: str) -> None:
    with pytest.raises(TileError):
        parse_tile_path(path)


def expected_tiles(size: int) -> set[str]:
    """The tiles of a tree of ``size`` leaves, from the spec's definitions alone: at level L
    there are size // 256**L hashes, in full tiles of 256 and one partial tile of the rest."""
    paths = set()
    for level in [*range(8), "entries"]:
        hashes = size // 256 ** (0 if level == "entries" else level)
        for n in range(hashes // 256):
            paths.add(tile_name(level, n, 256))
        if hashes % 256:
            paths.add(tile_name(level, hashes // 256, hashes % 256))
    return paths


def tile_name(level: object, n: int, width: int) -> str:
    digits = str(n).zfill((len(str(n)) + 2) // 3 * 3)
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    name = "/".join(["x" + group for group in groups[:-1]] + [groups[-1]])
    return f"tile/{level}/{name}" + ("" if width == 256 else f".p/{width}")


@given(st.integers(0, 2**18), st.integers(0, 2**18))
def test_the_tiles_a_tree_adds_are_those_the_spec_defines(first: int, second: int) -> None:
    since, size = sorted((first, second))
    added = [str(ref) for ref in tiles_of(size, since)]
    assert len(added) == len(set(added))
    # A tile the smaller tree has, at the same width, is not written again; every other is.
    assert set(added) == expected_tiles(size) - expected_tiles(since)


def test_a_bundle_is_length_prefixed_entries() -> None:
    entries = [b"", b"a", b"x" * 65_535]
    data = encode_bundle(entries)
    assert data[:5] == b"\x00\x00\x00\x01a"
    assert data[5:7] == b"\xff\xff"
    assert decode_bundle(data, 3) == entries
    for bad, width in [(data, 2), (data[:-1], 3), (data + b"\x00", 4), (b"\x00", 1)]:
        with pytest.raises(TileError):
            decode_bundle(bad, width)
    with pytest.raises(TileError):
        encode_bundle([b"x" * 65_536])


class Tiles(dict[tuple[int, int], list[bytes]]):
    """The widest tile of each (level, index) of a tree, hashed leaf by leaf here, so that the
    reader under test gets its bytes from an independent source; a narrower one is its start."""

    def __getitem__(self, ref: object) -> list[bytes]:
        assert isinstance(ref, TileRef) and ref.level is not None
        row = super().__getitem__((ref.level, ref.index))
        assert ref.width <= len(row)
        return row[: ref.width]


def tiles_of_tree(tree: MemoryTree) -> Tiles:
    leaves = [tree.node(0, i) for i in range(tree.size)]
    tiles = Tiles()
    level_hashes = leaves
    for level in range(3):
        for n in range((len(level_hashes) + 255) // 256):
            tiles[level, n] = level_hashes[n * 256 : n * 256 + 256]
        level_hashes = [
            mth(level_hashes[i : i + 256]) for i in range(0, len(level_hashes) - 255, 256)
        ]
    return tiles


def mth(hashes: list[bytes]) -> bytes:
    while len(hashes) > 1:
        hashes = [
            hashlib.sha256(b"\x01" + hashes[i] + hashes[i + 1]).digest()
            for i in range(0, len(hashes), 2)
        ]
    return hashes[0]


@pytest.fixture(scope="module")
def tree() -> MemoryTree:
    tree = MemoryTree()
    for i in range(70_000):  # past 256**2: three tile levels
        tree.append(leaf_hash(i.to_bytes(4, "big")))
    return tree


@pytest.fixture(scope="module")
def tiles(tree: MemoryTree) -> Tiles:
    return tiles_of_tree(tree)


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 511, 65_535, 65_536, 65_537, 70_000])
def test_roots_and_proofs_read_through_tiles_are_the_tree_s(
    tree: MemoryTree, tiles: Tiles, size: int
) -> None:
    fetched: list[TileRef] = []

    def fetch(ref: TileRef) -> list[bytes]:
        fetched.append(ref)
        return tiles[ref]

    nodes = TileNodes(size, fetch)
    assert root_from_reader(nodes, size) == tree.root(size)
    for index in {0, size // 2, size - 1}:
        assert inclusion_proof(nodes, index, size) == tree.inclusion_proof(index, size)
    for old in {1, size // 3 or 1, size - 1 or 1}:
        if old < size:
            assert consistency_proof(nodes, old, size) == tree.consistency_proof(old, size)
    assert len(fetched) == len(set(fetched)), "each tile is fetched once"
    assert all(str(ref) in expected_tiles(size) for ref in fetched), "only the tree's own tiles"


def test_a_tile_of_the_wrong_length_is_refused(tiles: Tiles) -> None:
    nodes = TileNodes(300, lambda ref: tiles[ref][:-1])
    with pytest.raises(TileError, match="does not hold"):
        root_from_reader(nodes, 300)
    with pytest.raises(TileError):
        split_hashes(b"\x00" * 33, 1)
