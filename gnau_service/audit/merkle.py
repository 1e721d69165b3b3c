"""RFC 6962 / RFC 9162 Merkle tree: hashing, proof generation and proof verification.

The tree over leaves ``d[0..n)`` is RFC 9162's ``MTH``: a leaf hashes as
``SHA-256(0x00 || data)``, an inner node as ``SHA-256(0x01 || left || right)``, a tree of ``n > 1``
leaves splits at the largest power of two strictly below ``n``, and the empty tree hashes as
``SHA-256("")``.

Storage is not this module's business. Proof generation reads *complete* subtrees through a
:class:`NodeReader` (the subtree of ``2**level`` leaves starting at leaf ``index * 2**level``);
complete subtrees never change once written, so a database can persist them as rows. The ragged
right edge of a tree is always assembled from O(log n) of them, so every proof and every root
costs O(log n) reads. :class:`Frontier` (the "compact range" of the tree) keeps only the
right-edge hashes, enough to append and compute the new root without rereading the log.

>>> tree = MemoryTree()
>>> for data in (b"a", b"b", b"c"):
...     _ = tree.append(leaf_hash(data))
>>> root = tree.root()
>>> verify_inclusion(leaf_hash(b"c"), 2, 3, tree.inclusion_proof(2, 3), root)
>>> verify_consistency(1, 3, tree.consistency_proof(1, 3), tree.root(1), root)
>>> verify_inclusion(leaf_hash(b"x"), 2, 3, tree.inclusion_proof(2, 3), root)
Traceback (most recent call last):
...
gnau_service.audit.merkle.RootMismatchError: root mismatch: the proof leads to ..., expected ...
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

HASH_SIZE: Final = 32
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

_LEAF_PREFIX: Final = b"\x00"
_NODE_PREFIX: Final = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """The RFC 6962 hash of one leaf: ``SHA-256(0x00 || data)``.

    >>> leaf_hash(b"").hex()[:16]
    '6e340b9cffb37a98'
    """
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The RFC 6962 hash of an inner node: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


# --- Errors ---------------------------------------------------------------------------------------


class ProofError(ValueError):
    """A proof that does not verify. Each subclass is one reason for rejecting it."""


class HashSizeError(ProofError):
    """A leaf hash or a proof hash that is not 32 bytes long."""


class IndexOutOfRangeError(ProofError):
    """A leaf index that is negative or not below the tree size."""


class TreeSizeError(ProofError):
    """A negative tree size, or a consistency proof whose second tree is smaller than the first."""


class EmptyTreeError(ProofError):
    """A consistency proof from the empty tree: it proves nothing, so it is always refused."""


class ProofLengthError(ProofError):
    """A proof with more or fewer hashes than the sizes and index require."""


class RootMismatchError(ProofError):
    """A well-formed proof that does not lead to the expected root."""

    def __init__(self, message: str, *, computed: bytes, expected: bytes) -> None:
        super().__init__(message)
        self.computed = computed
        self.expected = expected


def _require_hash_size(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise HashSizeError(f"{what} must be {HASH_SIZE} bytes, got {len(value)}")


# --- Reading complete subtrees --------------------------------------------------------------------


class NodeReader(Protocol):
    """Read access to the hashes of complete subtrees of a log."""

    def node(self, level: int, index: int) -> bytes:
        """The hash of the complete subtree of ``2**level`` leaves from leaf ``index * 2**level``.

        Level 0 holds the leaf hashes. Raises ``LookupError`` if that subtree is not complete.
        """
        ...


@dataclass(frozen=True)
class Node:
    """One complete subtree: ``level``, its ``index`` within that level, and its ``hash``."""

    level: int
    index: int
    hash: bytes


def _complete_subtrees(begin: int, end: int) -> list[tuple[int, int]]:
    """``(level, index)`` of the complete subtrees that tile ``[begin, end)``, left to right.

    ``begin`` must be a multiple of a power of two that is at least ``end - begin`` (true of every
    range the RFC 9162 split produces), so the tiles are the set bits of ``end - begin``, largest
    first, and RFC 9162's MTH of the range is their right fold.
    """
    tiles = []
    while begin < end:
        level = (end - begin).bit_length() - 1
        tiles.append((level, begin >> level))
        begin += 1 << level
    return tiles


def _fold_right(hashes: Sequence[bytes]) -> bytes:
    """MTH of a range from its complete subtrees, left to right (``EMPTY_ROOT`` for none)."""
    if not hashes:
        return EMPTY_ROOT
    root = hashes[-1]
    for left in reversed(hashes[:-1]):
        root = node_hash(left, root)
    return root


def _range_root(reader: NodeReader, begin: int, end: int) -> bytes:
    return _fold_right(
        [reader.node(level, index) for level, index in _complete_subtrees(begin, end)]
    )


def _largest_power_of_two_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def root_from_reader(reader: NodeReader, size: int) -> bytes:
    """The root of the first ``size`` leaves, in at most log2(size) + 1 reads."""
    if size < 0:
        raise ValueError(f"tree size must not be negative, got {size}")
    return _range_root(reader, 0, size)


def inclusion_proof(reader: NodeReader, index: int, size: int) -> list[bytes]:
    """RFC 9162 ``PATH(index, D[0:size])``: the sibling hashes from the leaf up to the root.

    Walks down from the root; each step's sibling is either a complete subtree (one read) or, at
    most once, the ragged right part of the tree (O(log n) reads).
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not in a tree of size {size}")
    siblings = []
    begin, end = 0, size
    while end - begin > 1:
        split = begin + _largest_power_of_two_below(end - begin)
        if index < split:
            siblings.append(_range_root(reader, split, end))
            end = split
        else:
            siblings.append(_range_root(reader, begin, split))
            begin = split
    siblings.reverse()
    return siblings


def consistency_proof(reader: NodeReader, size1: int, size2: int) -> list[bytes]:
    """RFC 9162 ``PROOF(size1, D[0:size2])`` for ``0 < size1 <= size2`` (empty when equal)."""
    if not 0 < size1 <= size2:
        raise ValueError(f"no consistency proof from size {size1} to size {size2}")
    hashes = []
    begin, end = 0, size2
    # RFC 9162 SUBPROOF(m, D[begin:end], b): `old_is_whole_subtree` is b, true while the old tree
    # is a left-aligned prefix whose root the verifier already has.
    old_is_whole_subtree = True
    while size1 - begin != end - begin:
        split = begin + _largest_power_of_two_below(end - begin)
        if size1 <= split:
            hashes.append(_range_root(reader, split, end))
            end = split
        else:
            hashes.append(_range_root(reader, begin, split))
            begin = split
            old_is_whole_subtree = False
    if not old_is_whole_subtree:
        hashes.append(_range_root(reader, begin, end))
    hashes.reverse()
    return hashes


# --- Appending ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frontier:
    """The right edge of a tree of ``size`` leaves: its complete subtrees' roots, largest first.

    One hash per set bit of ``size``. It is all that appending and computing roots needs, so a
    log can keep it in memory, persist the nodes each append reports, and never reread the log.

    >>> frontier = Frontier()
    >>> frontier, new_nodes = frontier.append(leaf_hash(b"a"))
    >>> frontier, new_nodes = frontier.append(leaf_hash(b"b"))
    >>> [(node.level, node.index) for node in new_nodes]
    [(0, 1), (1, 0)]
    >>> frontier.root() == node_hash(leaf_hash(b"a"), leaf_hash(b"b"))
    True
    """

    size: int = 0
    hashes: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if self.size < 0 or len(self.hashes) != self.size.bit_count():
            raise ValueError(
                f"a frontier of size {self.size} needs {max(self.size, 0).bit_count()} hashes, "
                f"got {len(self.hashes)}"
            )
        for node in self.hashes:
            _require_hash_size(node, "frontier hash")

    @classmethod
    def from_reader(cls, reader: NodeReader, size: int) -> Frontier:
        """The frontier of the first ``size`` leaves, in at most log2(size) + 1 reads."""
        tiles = _complete_subtrees(0, size)
        return cls(size, tuple(reader.node(level, index) for level, index in tiles))

    def append(self, leaf: bytes) -> tuple[Frontier, tuple[Node, ...]]:
        """Append one leaf hash: the new frontier, and every subtree the leaf completes.

        The new nodes are the leaf itself and, for each trailing one bit of ``size``, the merge of
        a waiting left subtree with the one just completed, so a store can write them as rows.
        """
        _require_hash_size(leaf, "leaf hash")
        waiting = list(self.hashes)
        completed = append_leaf(waiting, self.size, leaf)
        return Frontier(self.size + 1, tuple(waiting)), completed

    def root(self) -> bytes:
        """The root of the tree of ``size`` leaves."""
        return _fold_right(self.hashes)


def append_leaf(hashes: list[bytes], size: int, leaf: bytes) -> tuple[Node, ...]:
    """Append a 32-byte leaf hash to the frontier ``hashes`` of a tree of ``size`` leaves, in
    place, and return the complete subtrees it creates (see :meth:`Frontier.append`, which is
    this on a copy). For a writer that appends many leaves before it needs a :class:`Frontier`.
    """
    level, index, current = 0, size, leaf
    completed = [Node(level, index, current)]
    while index & 1:
        current = node_hash(hashes.pop(), current)
        level, index = level + 1, index >> 1
        completed.append(Node(level, index, current))
    hashes.append(current)
    return tuple(completed)


def root_of(leaf_hashes: Iterable[bytes]) -> bytes:
    """The RFC 6962 root of a list of leaf hashes (``EMPTY_ROOT`` for none).

    >>> root_of([]) == EMPTY_ROOT
    True
    """
    frontier = Frontier()
    for leaf in leaf_hashes:
        frontier, _ = frontier.append(leaf)
    return frontier.root()


class MemoryTree:
    """An in-memory log: every complete subtree hash, as a database would keep them.

    For tests, benchmarks and small tools; it is the reference :class:`NodeReader`.
    """

    def __init__(self) -> None:
        self._levels: list[list[bytes]] = []
        self._frontier = Frontier()

    @property
    def size(self) -> int:
        return self._frontier.size

    @property
    def frontier(self) -> Frontier:
        return self._frontier

    def append(self, leaf: bytes) -> tuple[Node, ...]:
        """Append a leaf hash; returns the complete subtrees it creates, as Frontier.append."""
        self._frontier, completed = self._frontier.append(leaf)
        for node in completed:
            if node.level == len(self._levels):
                self._levels.append([])
            self._levels[node.level].append(node.hash)
        return completed

    def node(self, level: int, index: int) -> bytes:
        if (
            level < 0
            or index < 0
            or level >= len(self._levels)
            or index >= len(self._levels[level])
        ):
            raise LookupError(f"no complete subtree at level {level}, index {index}")
        return self._levels[level][index]

    def root(self, size: int | None = None) -> bytes:
        """The root at ``size`` (default: the current size)."""
        return root_from_reader(self, self._checked_size(size))

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        return inclusion_proof(self, index, self._checked_size(size))

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        return consistency_proof(self, size1, self._checked_size(size2))

    def _checked_size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} is not in 0..{self.size}")
        return size


# --- Verification ---------------------------------------------------------------------------------


def _inclusion_proof_length(index: int, size: int) -> int:
    """How many hashes ``PATH(index, D[0:size])`` has, for ``0 <= index < size``.

    Below the level where the paths to ``index`` and to the last leaf meet, every level has a
    sibling. Above it the path runs along the right border, which has a (left) sibling only where
    the path is a right child: one per set bit of ``index`` at those levels.
    """
    below = (index ^ (size - 1)).bit_length()
    return below + (index >> below).bit_count()


def _consistency_proof_length(size1: int, size2: int) -> int:
    """How many hashes ``PROOF(size1, D[0:size2])`` has, for ``0 < size1 < size2``.

    It is the inclusion path of the last old leaf, without the levels inside the largest complete
    subtree that ends the old tree; that subtree's root comes first in the proof, except when it
    is the whole old tree, whose root the verifier already has.
    """
    levels_inside = (size1 & -size1).bit_length() - 1
    length = _inclusion_proof_length(size1 - 1, size2) - levels_inside
    return length if size1 == 1 << levels_inside else length + 1


def _check_proof(proof: Sequence[bytes], expected_length: int) -> None:
    if len(proof) != expected_length:
        raise ProofLengthError(f"proof has {len(proof)} hashes, expected {expected_length}")
    for position, node in enumerate(proof):
        _require_hash_size(node, f"proof hash {position}")


def _root_mismatch(what: str, computed: bytes, expected: bytes) -> RootMismatchError:
    return RootMismatchError(
        f"{what} mismatch: the proof leads to {computed.hex()}, expected {expected.hex()}",
        computed=computed,
        expected=expected,
    )


def root_from_inclusion_proof(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` connects ``leaf`` (at ``index`` of ``size``) to; RFC 9162 2.1.3.2.

    Raises a :class:`ProofError` subclass for a malformed proof; it does not compare roots.
    """
    _require_hash_size(leaf, "leaf hash")
    if not 0 <= index < size:
        raise IndexOutOfRangeError(f"leaf index {index} is not below tree size {size}")
    _check_proof(proof, _inclusion_proof_length(index, size))
    node, last = index, size - 1  # fn and sn in RFC 9162
    result = leaf
    for sibling in proof:
        if node & 1 or node == last:
            result = node_hash(sibling, result)
            # A left child on the right border has no sibling: skip up to where one exists.
            while node and not node & 1:
                node, last = node >> 1, last >> 1
        else:
            result = node_hash(result, sibling)
        node, last = node >> 1, last >> 1
    return result


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf`` is at ``index`` in the tree of ``size`` leaves with ``root``.

    Raises (all :class:`ProofError`): :class:`HashSizeError` if the leaf hash or a proof hash is not
    32 bytes; :class:`IndexOutOfRangeError` if not ``0 <= index < size``; :class:`ProofLengthError`
    if the proof has the wrong number of hashes; :class:`RootMismatchError` if it leads elsewhere.
    """
    computed = root_from_inclusion_proof(leaf, index, size, proof)
    if computed != root:
        raise _root_mismatch("root", computed, root)


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size1`` leaves with ``root1`` is a prefix of ``size2`` / ``root2``.

    RFC 9162 2.1.4.2, with the same extra rules as transparency-dev/merkle. Raises (all
    :class:`ProofError`): :class:`TreeSizeError` if a size is negative or ``size2 < size1``;
    :class:`EmptyTreeError` if ``size1 == 0`` (every tree extends the empty one, so such a proof
    proves nothing and is refused even when empty); :class:`ProofLengthError` if the sizes are equal
    and the proof is not empty, or the proof has the wrong number of hashes; :class:`HashSizeError`
    if a proof hash is not 32 bytes; :class:`RootMismatchError` if the sizes are equal and the roots
    differ, or the proof does not lead to ``root1`` or to ``root2``.

    With equal sizes the roots are compared as given, whatever their length, as the reference
    library does.
    """
    if size1 < 0 or size2 < size1:
        raise TreeSizeError(f"no consistency from size {size1} to size {size2}")
    if size1 == 0:
        raise EmptyTreeError("a consistency proof from the empty tree proves nothing")
    if size1 == size2:
        if proof:
            raise ProofLengthError(f"sizes are equal, so the proof must be empty; got {len(proof)}")
        if root1 != root2:
            raise RootMismatchError(
                f"sizes are equal but the roots differ: {root1.hex()} and {root2.hex()}",
                computed=root2,
                expected=root1,
            )
        return
    _check_proof(proof, _consistency_proof_length(size1, size2))

    # When size1 is a power of two the old tree is a complete subtree of the new one and its root
    # is the seed; otherwise the proof starts with the root of the largest complete subtree that
    # ends the old tree. Both roots are then rebuilt along the path of the last old leaf.
    hashes = [root1, *proof] if size1 & (size1 - 1) == 0 else list(proof)
    node, last = size1 - 1, size2 - 1
    while node & 1:  # start above the levels inside that subtree
        node, last = node >> 1, last >> 1
    old_root = new_root = hashes[0]
    for sibling in hashes[1:]:
        if node & 1 or node == last:
            old_root = node_hash(sibling, old_root)
            new_root = node_hash(sibling, new_root)
            while node and not node & 1:
                node, last = node >> 1, last >> 1
        else:
            new_root = node_hash(new_root, sibling)  # hashes right of the old tree: new tree only
        node, last = node >> 1, last >> 1
    if old_root != root1:
        raise _root_mismatch("root1", old_root, root1)
    if new_root != root2:
        raise _root_mismatch("root2", new_root, root2)
