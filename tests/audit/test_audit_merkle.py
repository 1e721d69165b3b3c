"""Merkle tree: transparency-dev/merkle vectors and probes, an RFC 9162 oracle, and properties."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.merkle import (
    EMPTY_ROOT,
    EmptyTreeError,
    Frontier,
    HashSizeError,
    IndexOutOfRangeError,
    MemoryTree,
    ProofError,
    ProofLengthError,
    RootMismatchError,
    TreeSizeError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_reader,
    root_of,
    verify_consistency,
    verify_inclusion,
)

from . import rfc6962_reference as rfc
from .vectors import MERKLE, hexes

VECTOR_LEAVES = [bytes.fromhex(data) for data in MERKLE["leaf_inputs_hex"]]


def build_tree(leaf_data: list[bytes]) -> MemoryTree:
    tree = MemoryTree()
    for data in leaf_data:
        tree.append(leaf_hash(data))
    return tree


@pytest.fixture(scope="module")
def vector_tree() -> MemoryTree:
    return build_tree(VECTOR_LEAVES)


# A larger tree of distinct leaves, shared by the property tests (prefixes of it are trees too).
BIG = 300
BIG_DATA = [i.to_bytes(4, "big") for i in range(BIG)]
BIG_LEAVES = [rfc.leaf(data) for data in BIG_DATA]
BIG_TREE = build_tree(BIG_DATA)


# --- Official vectors -----------------------------------------------------------------------------


def test_hash_functions_match_the_vectors() -> None:
    assert EMPTY_ROOT.hex() == MERKLE["empty_tree_hash"]
    assert root_of([]).hex() == MERKLE["empty_tree_hash"]
    assert leaf_hash(b"") == rfc.leaf(b"")
    assert (
        node_hash(b"a" * 32, b"b" * 32) == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    )


@pytest.mark.parametrize("size", range(9))
def test_roots_match_the_vectors(vector_tree: MemoryTree, size: int) -> None:
    expected = MERKLE["root_hashes_by_tree_size"][str(size)]
    assert vector_tree.root(size).hex() == expected
    assert root_of(leaf_hash(data) for data in VECTOR_LEAVES[:size]).hex() == expected


def test_every_complete_subtree_matches_the_vectors(vector_tree: MemoryTree) -> None:
    levels = MERKLE["node_hashes_by_level"]["levels"]
    for level, hashes in enumerate(levels):
        for index, expected in enumerate(hashes):
            assert vector_tree.node(level, index).hex() == expected
    with pytest.raises(LookupError):
        vector_tree.node(len(levels), 0)


@pytest.mark.parametrize(
    "case",
    MERKLE["inclusion_proofs"]["cases"],
    ids=lambda case: f"leaf-{case['leaf_index']}-of-{case['tree_size']}",
)
def test_inclusion_proof_vectors(vector_tree: MemoryTree, case: dict[str, Any]) -> None:
    index, size, proof = case["leaf_index"], case["tree_size"], hexes(case["proof"])
    assert vector_tree.inclusion_proof(index, size) == proof
    leaf = leaf_hash(bytes.fromhex(case["leaf_input_hex"]))
    verify_inclusion(leaf, index, size, proof, bytes.fromhex(case["root_hash"]))


@pytest.mark.parametrize(
    "case",
    MERKLE["consistency_proofs"]["cases"],
    ids=lambda case: f"{case['size1']}-to-{case['size2']}",
)
def test_consistency_proof_vectors(vector_tree: MemoryTree, case: dict[str, Any]) -> None:
    size1, size2, proof = case["size1"], case["size2"], hexes(case["proof"])
    assert vector_tree.consistency_proof(size1, size2) == proof
    root1, root2 = bytes.fromhex(case["root1"]), bytes.fromhex(case["root2"])
    verify_consistency(size1, size2, proof, root1, root2)


def test_there_are_98_probes_of_each_kind() -> None:
    assert len(MERKLE["probes"]["inclusion"]) == 98
    assert len(MERKLE["probes"]["consistency"]) == 98


def _outcome(check: Callable[[], None]) -> ProofError | None:
    try:
        check()
    except ProofError as error:
        return error
    return None


@pytest.mark.parametrize("probe", MERKLE["probes"]["inclusion"], ids=lambda p: p["file"])
def test_inclusion_probe(probe: dict[str, Any]) -> None:
    error = _outcome(
        lambda: verify_inclusion(
            bytes.fromhex(probe["leafHash"]),
            probe["leafIdx"],
            probe["treeSize"],
            hexes(probe["proof"]),
            bytes.fromhex(probe["root"]),
        )
    )
    assert (error is not None) == probe["wantErr"], error


@pytest.mark.parametrize("probe", MERKLE["probes"]["consistency"], ids=lambda p: p["file"])
def test_consistency_probe(probe: dict[str, Any]) -> None:
    error = _outcome(
        lambda: verify_consistency(
            probe["size1"],
            probe["size2"],
            hexes(probe["proof"]),
            bytes.fromhex(probe["root1"]),
            bytes.fromhex(probe["root2"]),
        )
    )
    assert (error is not None) == probe["wantErr"], error


# --- Each rejection, with its own error class -----------------------------------------------------

ROOT5 = rfc.mth(BIG_LEAVES[:5])
ROOT8 = rfc.mth(BIG_LEAVES[:8])
LEAF1 = BIG_LEAVES[1]
PATH_1_OF_5 = rfc.path(1, BIG_LEAVES[:5])
PROOF_3_TO_8 = rfc.proof(3, BIG_LEAVES[:8])
ROOT3 = rfc.mth(BIG_LEAVES[:3])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        pytest.param((LEAF1[:31], 1, 5, PATH_1_OF_5, ROOT5), HashSizeError, id="short-leaf-hash"),
        pytest.param((LEAF1 + b"\0", 1, 5, PATH_1_OF_5, ROOT5), HashSizeError, id="long-leaf-hash"),
        pytest.param((LEAF1, 5, 5, PATH_1_OF_5, ROOT5), IndexOutOfRangeError, id="index-eq-size"),
        pytest.param((LEAF1, -1, 5, PATH_1_OF_5, ROOT5), IndexOutOfRangeError, id="index-negative"),
        pytest.param((LEAF1, 0, 0, [], EMPTY_ROOT), IndexOutOfRangeError, id="empty-tree"),
        pytest.param((LEAF1, 1, 5, PATH_1_OF_5[:-1], ROOT5), ProofLengthError, id="missing-hash"),
        pytest.param(
            (LEAF1, 1, 5, [*PATH_1_OF_5, ROOT5], ROOT5), ProofLengthError, id="extra-hash"
        ),
        pytest.param(
            (LEAF1, 1, 5, [PATH_1_OF_5[0][:16], *PATH_1_OF_5[1:]], ROOT5),
            HashSizeError,
            id="short-proof-hash",
        ),
        pytest.param((LEAF1, 1, 5, PATH_1_OF_5, ROOT8), RootMismatchError, id="other-root"),
    ],
)
def test_inclusion_rejections(arguments: tuple[object, ...], error: type[ProofError]) -> None:
    with pytest.raises(error):
        verify_inclusion(*arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        pytest.param((3, 8, PROOF_3_TO_8, ROOT3, ROOT8), None, id="valid"),
        pytest.param((8, 3, PROOF_3_TO_8, ROOT8, ROOT3), TreeSizeError, id="size2-below-size1"),
        pytest.param((-1, 3, [], ROOT3, ROOT3), TreeSizeError, id="negative-size"),
        pytest.param((0, 8, [], EMPTY_ROOT, ROOT8), EmptyTreeError, id="from-empty-no-proof"),
        pytest.param((0, 8, PROOF_3_TO_8, EMPTY_ROOT, ROOT8), EmptyTreeError, id="from-empty"),
        pytest.param((0, 0, [], EMPTY_ROOT, EMPTY_ROOT), EmptyTreeError, id="empty-to-empty"),
        pytest.param((8, 8, [ROOT8], ROOT8, ROOT8), ProofLengthError, id="equal-sizes-proof"),
        pytest.param((8, 8, [], ROOT8, ROOT5), RootMismatchError, id="equal-sizes-roots-differ"),
        pytest.param((3, 8, [], ROOT3, ROOT8), ProofLengthError, id="empty-proof"),
        pytest.param((3, 8, PROOF_3_TO_8[:-1], ROOT3, ROOT8), ProofLengthError, id="missing-hash"),
        pytest.param((3, 8, [*PROOF_3_TO_8, ROOT8], ROOT3, ROOT8), ProofLengthError, id="extra"),
        pytest.param(
            (3, 8, [b"", *PROOF_3_TO_8[1:]], ROOT3, ROOT8), HashSizeError, id="empty-proof-hash"
        ),
        pytest.param((3, 8, PROOF_3_TO_8, ROOT5, ROOT8), RootMismatchError, id="wrong-root1"),
        pytest.param((3, 8, PROOF_3_TO_8, ROOT3, ROOT5), RootMismatchError, id="wrong-root2"),
    ],
)
def test_consistency_rejections(
    arguments: tuple[object, ...], error: type[ProofError] | None
) -> None:
    if error is None:
        verify_consistency(*arguments)  # type: ignore[arg-type]
    else:
        with pytest.raises(error):
            verify_consistency(*arguments)  # type: ignore[arg-type]


def test_root_mismatch_names_both_roots() -> None:
    with pytest.raises(RootMismatchError) as caught:
        verify_inclusion(LEAF1, 1, 5, PATH_1_OF_5, ROOT8)
    assert caught.value.expected == ROOT8
    assert caught.value.computed == ROOT5
    assert ROOT8.hex() in str(caught.value)


def test_inclusion_does_not_bind_the_size_to_the_root() -> None:
    # Documented limitation of RFC 6962 inclusion proofs: the path for leaf 0 of 5 also "proves"
    # leaf 0 of 6 against the size-5 root. Size and root must come from one signed checkpoint.
    verify_inclusion(BIG_LEAVES[0], 0, 6, rfc.path(0, BIG_LEAVES[:5]), ROOT5)
    with pytest.raises(RootMismatchError):
        verify_inclusion(BIG_LEAVES[0], 0, 6, rfc.path(0, BIG_LEAVES[:5]), rfc.mth(BIG_LEAVES[:6]))


# --- Generation against the RFC oracle, and O(log n) reads ----------------------------------------


def test_exhaustive_small_trees_match_the_rfc_oracle() -> None:
    for size in range(0, 40):
        leaves = BIG_LEAVES[:size]
        assert BIG_TREE.root(size) == rfc.mth(leaves)
        for index in range(size):
            assert BIG_TREE.inclusion_proof(index, size) == rfc.path(index, leaves)
        for size1 in range(1, size + 1):
            assert BIG_TREE.consistency_proof(size1, size) == rfc.proof(size1, leaves)


class CountingReader:
    def __init__(self, tree: MemoryTree) -> None:
        self.tree = tree
        self.reads = 0

    def node(self, level: int, index: int) -> bytes:
        self.reads += 1
        return self.tree.node(level, index)


@pytest.mark.parametrize("size", [1, 2, 7, 64, 255, 256, 257, 299, 300])
def test_proofs_and_roots_read_o_log_n_nodes(size: int) -> None:
    bound = 2 * size.bit_length() + 1
    for index in {0, size // 2, size - 1}:
        reader = CountingReader(BIG_TREE)
        inclusion_proof(reader, index, size)
        assert reader.reads <= bound
    for size1 in {1, size // 3 or 1, size - 1 or 1}:
        reader = CountingReader(BIG_TREE)
        consistency_proof(reader, size1, size)
        assert reader.reads <= bound
    reader = CountingReader(BIG_TREE)
    assert root_from_reader(reader, size) == rfc.mth(BIG_LEAVES[:size])
    assert reader.reads == size.bit_count()


def test_generation_refuses_impossible_requests() -> None:
    with pytest.raises(ValueError, match="not in a tree"):
        BIG_TREE.inclusion_proof(5, 5)
    with pytest.raises(ValueError, match="no consistency proof"):
        BIG_TREE.consistency_proof(0, 5)
    with pytest.raises(ValueError, match="no consistency proof"):
        BIG_TREE.consistency_proof(6, 5)
    with pytest.raises(ValueError, match="not in 0"):
        BIG_TREE.root(BIG + 1)
    with pytest.raises(LookupError):
        BIG_TREE.node(0, -1)  # a negative index must not wrap around
    with pytest.raises(ValueError):
        root_from_reader(BIG_TREE, -1)


# --- Appending: the frontier and the nodes a store persists ---------------------------------------


def test_append_reports_exactly_the_newly_complete_subtrees() -> None:
    tree = MemoryTree()
    persisted: dict[tuple[int, int], bytes] = {}
    for size, leaf in enumerate(BIG_LEAVES[:70], start=1):
        for node in tree.append(leaf):
            assert (node.level, node.index) not in persisted
            persisted[(node.level, node.index)] = node.hash
        assert set(persisted) == rfc.complete_subtrees(size)
    for (level, index), value in persisted.items():
        assert value == rfc.mth(BIG_LEAVES[index << level : (index + 1) << level])


def test_frontier_from_reader_equals_the_appended_frontier() -> None:
    frontier = Frontier()
    for size in range(0, 100):
        assert Frontier.from_reader(BIG_TREE, size) == frontier
        assert frontier.root() == rfc.mth(BIG_LEAVES[:size])
        assert len(frontier.hashes) == size.bit_count()
        frontier, _ = frontier.append(BIG_LEAVES[size])


def test_frontier_rejects_inconsistent_state() -> None:
    with pytest.raises(ValueError, match="needs 2 hashes"):
        Frontier(3, (ROOT5,))
    with pytest.raises(HashSizeError):
        Frontier(1, (b"short",))
    with pytest.raises(HashSizeError):
        Frontier().append(b"not a hash")


# --- Properties on random trees -------------------------------------------------------------------


@st.composite
def leaf_in_tree(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(1, BIG - 1))
    return draw(st.integers(0, size - 1)), size


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    size2 = draw(st.integers(2, BIG - 1))
    return draw(st.integers(1, size2 - 1)), size2


def _flip(value: bytes, position: int) -> bytes:
    return value[:position] + bytes([value[position] ^ 0x01]) + value[position + 1 :]


@given(leaf_in_tree(), st.data())
def test_inclusion_proofs_verify_and_every_tampering_fails(
    case: tuple[int, int], data: st.DataObject
) -> None:
    index, size = case
    proof = BIG_TREE.inclusion_proof(index, size)
    root = BIG_TREE.root(size)
    assert proof == rfc.path(index, BIG_LEAVES[:size])
    verify_inclusion(BIG_LEAVES[index], index, size, proof, root)

    byte = data.draw(st.integers(0, 31), label="byte")
    with pytest.raises(RootMismatchError):
        verify_inclusion(_flip(BIG_LEAVES[index], byte), index, size, proof, root)
    with pytest.raises(RootMismatchError):
        verify_inclusion(BIG_LEAVES[index], index, size, proof, _flip(root, byte))
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1), label="proof hash")
        tampered = [*proof[:position], _flip(proof[position], byte), *proof[position + 1 :]]
        with pytest.raises(RootMismatchError):
            verify_inclusion(BIG_LEAVES[index], index, size, tampered, root)
        with pytest.raises(ProofLengthError):
            verify_inclusion(BIG_LEAVES[index], index, size, proof[:-1], root)
    with pytest.raises(ProofLengthError):
        verify_inclusion(BIG_LEAVES[index], index, size, [*proof, root], root)
    for other_index in (index - 1, index + 1):
        with pytest.raises(ProofError):
            verify_inclusion(BIG_LEAVES[index], other_index, size, proof, root)
    # A size is only meaningful with its own root (see the test on size binding above).
    for other_size in (size - 1, size + 1):
        with pytest.raises(ProofError):
            verify_inclusion(BIG_LEAVES[index], index, other_size, proof, BIG_TREE.root(other_size))


@given(two_sizes(), st.data())
def test_consistency_proofs_verify_and_every_tampering_fails(
    sizes: tuple[int, int], data: st.DataObject
) -> None:
    size1, size2 = sizes
    proof = BIG_TREE.consistency_proof(size1, size2)
    root1, root2 = BIG_TREE.root(size1), BIG_TREE.root(size2)
    assert proof == rfc.proof(size1, BIG_LEAVES[:size2])
    verify_consistency(size1, size2, proof, root1, root2)
    verify_consistency(size2, size2, [], root2, root2)

    byte = data.draw(st.integers(0, 31), label="byte")
    position = data.draw(st.integers(0, len(proof) - 1), label="proof hash")
    tampered = [*proof[:position], _flip(proof[position], byte), *proof[position + 1 :]]
    with pytest.raises(RootMismatchError):
        verify_consistency(size1, size2, tampered, root1, root2)
    with pytest.raises(RootMismatchError):
        verify_consistency(size1, size2, proof, _flip(root1, byte), root2)
    with pytest.raises(RootMismatchError):
        verify_consistency(size1, size2, proof, root1, _flip(root2, byte))
    with pytest.raises(ProofLengthError):
        verify_consistency(size1, size2, proof[:-1], root1, root2)
    with pytest.raises(ProofLengthError):
        verify_consistency(size1, size2, [*proof, root2], root1, root2)
    for other1, other2 in (
        (size1 - 1, size2),
        (size1 + 1, size2),
        (size1, size2 - 1),
        (size1, size2 + 1),
    ):
        if (other1, other2) == (size1, size2) or not 0 < other1 < other2:
            continue
        with pytest.raises(ProofError):
            verify_consistency(other1, other2, proof, BIG_TREE.root(other1), BIG_TREE.root(other2))
