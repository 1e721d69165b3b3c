"""RFC 9162 section 2.1 written out literally (recursive MTH, PATH and PROOF over whole lists).

Slow and obviously right: an oracle for the O(log n) implementation in gnau_service.audit.merkle,
sharing no code with it.
"""

from __future__ import annotations

import hashlib


def leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly below n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    """MTH(D[n]) over leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(mth(leaves[:k]), mth(leaves[k:]))


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    """PATH(m, D[n])."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def proof(m: int, leaves: list[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) for 0 < m <= n."""
    return _subproof(m, leaves, True)


def _subproof(m: int, leaves: list[bytes], whole: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if whole else [mth(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], whole), mth(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), mth(leaves[:k])]


def complete_subtrees(n: int) -> set[tuple[int, int]]:
    """Every (level, index) whose subtree of 2**level leaves lies within the first n leaves."""
    return {(level, index) for level in range(n.bit_length()) for index in range(n >> level)}
