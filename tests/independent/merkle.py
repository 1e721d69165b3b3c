"""The RFC 6962 / RFC 9162 Merkle tree with SHA-256 (docs/audit.md, The Merkle tree): roots
from a frontier, inclusion and consistency proofs."""

from __future__ import annotations

import hashlib

from tests.independent.common import check


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


EMPTY_ROOT = hashlib.sha256(b"").digest()


class Frontier:
    """The roots of the complete subtrees along the right edge, largest first, with their
    sizes: one per set bit of the tree's size."""

    def __init__(self, size: int, hashes: list[bytes]) -> None:
        sizes = [1 << bit for bit in reversed(range(size.bit_length())) if size >> bit & 1]
        check(len(sizes) == len(hashes), "the frontier has not one hash per set bit of its size")
        self.size = size
        self.parts = list(zip(sizes, hashes, strict=True))

    def append(self, leaf: bytes) -> None:
        self.parts.append((1, leaf))
        self.size += 1
        while len(self.parts) > 1 and self.parts[-1][0] == self.parts[-2][0]:
            (width, right), (_, left) = self.parts.pop(), self.parts.pop()
            self.parts.append((2 * width, node_hash(left, right)))

    def root(self) -> bytes:
        if not self.parts:
            return EMPTY_ROOT
        root = self.parts[-1][1]
        for _, left in reversed(self.parts[:-1]):
            root = node_hash(left, root)
        return root


def _inner_and_border(index: int, size: int) -> tuple[int, int]:
    inner = (index ^ (size - 1)).bit_length()
    border = bin(index >> inner).count("1")
    return inner, border


def root_from_inclusion(leaf: bytes, index: int, size: int, proof: list[bytes]) -> bytes:
    """RFC 9162 2.1.3.2: the root an inclusion proof leads to."""
    check(0 <= index < size, "the index is outside the tree")
    check(all(len(h) == 32 for h in proof), "a proof hash is not 32 bytes")
    inner, border = _inner_and_border(index, size)
    check(len(proof) == inner + border, "the proof has the wrong number of hashes")
    root = leaf
    for level, sibling in enumerate(proof[:inner]):
        root = node_hash(root, sibling) if (index >> level) & 1 == 0 else node_hash(sibling, root)
    for sibling in proof[inner:]:
        root = node_hash(sibling, root)
    return root


def check_consistency(
    size1: int, size2: int, proof: list[bytes], root1: bytes, root2: bytes
) -> None:
    """RFC 9162 2.1.4.2, for 0 < size1 <= size2."""
    check(0 < size1 <= size2, "no consistency proof between these sizes")
    if size1 == size2:
        check(not proof and root1 == root2, "two roots for one size")
        return
    check(proof and all(len(h) == 32 for h in proof), "a malformed consistency proof")
    if size1 & (size1 - 1) == 0:
        proof = [root1, *proof]
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = proof[0]
    for c in proof[1:]:
        check(sn != 0, "the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    check(sn == 0 and fr == root1 and sr == root2, "the consistency proof does not hold")
