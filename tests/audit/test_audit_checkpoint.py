"""C2SP tlog-checkpoints: the spec example, signing and opening, edits, and fork evidence."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import (
    Checkpoint,
    CheckpointError,
    ForkEvidence,
    SignedCheckpoint,
    find_fork,
    log_origin,
    open_checkpoint,
    sign_checkpoint,
)
from gnau_service.audit.merkle import EMPTY_ROOT, MemoryTree, ProofLengthError, leaf_hash
from gnau_service.audit.note import (
    InvalidSignatureError,
    MalformedNoteError,
    Signer,
    UnverifiedNoteError,
)

from .vectors import SIGNED_NOTE

ORIGIN = "gnau-dealer/test"
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(b"\x07" * 32))
STRANGER = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(b"\x08" * 32))
ROOT = bytes(range(32))
ROOT_B64 = base64.b64encode(ROOT).decode()

SPEC_CHECKPOINT: dict[str, Any] = SIGNED_NOTE["notes"][2]


def test_spec_example_checkpoint_parses() -> None:
    checkpoint = Checkpoint.parse(SPEC_CHECKPOINT["signed_message"])
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root_hash == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.extensions == ()
    assert checkpoint.to_note_text() == SPEC_CHECKPOINT["signed_message"]


def test_spec_example_checkpoint_is_refused_without_its_key() -> None:
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(
            SPEC_CHECKPOINT["note_text_full"], "example.com/behind-the-sofa", [LOG.verifier]
        )


def test_text_form_is_exactly_three_lines_plus_extensions() -> None:
    checkpoint = Checkpoint(ORIGIN, 5, ROOT, ("ext one", "ext two"))
    expected = f"{ORIGIN}\n5\n{ROOT_B64}\next one\next two\n"
    assert checkpoint.to_note_text() == expected
    assert Checkpoint.parse(expected) == checkpoint


def test_sign_then_open_round_trip() -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 5, ROOT), LOG)
    opened = open_checkpoint(note.encode(), ORIGIN, [LOG.verifier])
    assert opened.checkpoint == Checkpoint(ORIGIN, 5, ROOT)
    assert opened.signed_by == (LOG.verifier,)
    assert str(opened.note).startswith(f"{ORIGIN}\n5\n{ROOT_B64}\n\n\u2014 {ORIGIN} ")


SIGNED = str(sign_checkpoint(Checkpoint(ORIGIN, 5, ROOT), LOG))
OTHER_ROOT_B64 = base64.b64encode(bytes(32)).decode()


@pytest.mark.parametrize(
    ("edited", "error"),
    [
        pytest.param(SIGNED.replace("\n5\n", "\n6\n"), InvalidSignatureError, id="size"),
        pytest.param(SIGNED.replace(ROOT_B64, OTHER_ROOT_B64), InvalidSignatureError, id="root"),
        pytest.param(SIGNED.replace("test\n", "prod\n", 1), InvalidSignatureError, id="origin"),
        pytest.param(SIGNED.replace("\u2014", "-"), MalformedNoteError, id="hyphen"),
        pytest.param(SIGNED.replace("\n", "\r\n"), MalformedNoteError, id="crlf"),
        pytest.param(SIGNED.removesuffix("\n"), MalformedNoteError, id="no-final-newline"),
    ],
)
def test_edited_checkpoints_are_refused(edited: str, error: type[Exception]) -> None:
    assert edited != SIGNED
    with pytest.raises(error):
        open_checkpoint(edited, ORIGIN, [LOG.verifier])


def test_a_checkpoint_signed_only_by_an_unknown_key_is_refused() -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 5, ROOT), STRANGER)
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(note.encode(), ORIGIN, [LOG.verifier])


def test_a_checkpoint_of_another_origin_is_refused() -> None:
    note = sign_checkpoint(Checkpoint("gnau-dealer/other", 5, ROOT), LOG)
    with pytest.raises(CheckpointError, match="expected 'gnau-dealer/test'"):
        open_checkpoint(note.encode(), ORIGIN, [LOG.verifier])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64}", "newline", id="no-final-newline"),
        pytest.param(f"{ORIGIN}\n5\n", "origin, size and root", id="two-lines"),
        pytest.param(f"\n5\n{ROOT_B64}\n", "line 1 is empty", id="empty-origin"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64}\n\next\n", "line 4 is empty", id="empty-extension"),
        pytest.param(f"{ORIGIN}\n05\n{ROOT_B64}\n", "leading zeros", id="leading-zero"),
        pytest.param(f"{ORIGIN}\n00\n{ROOT_B64}\n", "leading zeros", id="double-zero"),
        pytest.param(f"{ORIGIN}\n+5\n{ROOT_B64}\n", "decimal", id="plus-sign"),
        pytest.param(f"{ORIGIN}\n-1\n{ROOT_B64}\n", "decimal", id="negative"),
        pytest.param(f"{ORIGIN}\n 5\n{ROOT_B64}\n", "decimal", id="space"),
        pytest.param(f"{ORIGIN}\n\u0665\n{ROOT_B64}\n", "decimal", id="arabic-digit"),
        pytest.param(f"{ORIGIN}\n5_0\n{ROOT_B64}\n", "decimal", id="underscore"),
        pytest.param(f"{ORIGIN}\n{2**64}\n{ROOT_B64}\n", "2\\*\\*64", id="size-over-uint64"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT_B64[:-1]}\n", "base64", id="root-bad-padding"),
        pytest.param(f"{ORIGIN}\n5\nAAAA\n", "32 bytes", id="root-3-bytes"),
        pytest.param(f"{ORIGIN}\n5\n{ROOT.hex()}\n", "base64|32 bytes", id="root-in-hex"),
    ],
)
def test_malformed_checkpoint_bodies_are_refused(text: str, reason: str) -> None:
    with pytest.raises(CheckpointError, match=reason):
        Checkpoint.parse(text)


def test_size_zero_and_the_largest_size_are_accepted() -> None:
    assert Checkpoint.parse(f"{ORIGIN}\n0\n{ROOT_B64}\n").size == 0
    assert Checkpoint.parse(f"{ORIGIN}\n{2**64 - 1}\n{ROOT_B64}\n").size == 2**64 - 1


@pytest.mark.parametrize(
    "fields",
    [
        ("", 1, ROOT, ()),
        ("two\nlines", 1, ROOT, ()),
        (ORIGIN, -1, ROOT, ()),
        (ORIGIN, 1, ROOT[:31], ()),
        (ORIGIN, 1, ROOT, ("",)),
        (ORIGIN, 1, ROOT, ("bell\x07",)),
    ],
)
def test_invalid_checkpoints_cannot_be_built(fields: tuple[Any, ...]) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint(*fields)


def test_log_origin_naming() -> None:
    assert log_origin("eu-prod-1") == "gnau-dealer/eu-prod-1"
    for bad in ("", "Prod", "prod/1", "prod 1", "-prod", "prod-", "a" * 65, "prod+1"):
        with pytest.raises(CheckpointError):
            log_origin(bad)


# --- Fork evidence --------------------------------------------------------------------------------


def tree_of(*leaves: bytes) -> MemoryTree:
    tree = MemoryTree()
    for data in leaves:
        tree.append(leaf_hash(data))
    return tree


def signed_at(
    tree: MemoryTree, size: int, signer: Signer = LOG, origin: str = ORIGIN
) -> SignedCheckpoint:
    note = sign_checkpoint(Checkpoint(origin, size, tree.root(size)), signer)
    return open_checkpoint(note.encode(), origin, [signer.verifier])


HONEST = tree_of(b"a", b"b", b"c", b"d", b"e", b"f")
FORKED = tree_of(b"a", b"b", b"X", b"d", b"e", b"f")  # leaf 2 rewritten


def test_consistent_checkpoints_are_no_fork() -> None:
    old, new = signed_at(HONEST, 3), signed_at(HONEST, 6)
    proof = HONEST.consistency_proof(3, 6)
    assert find_fork(old, new, proof) is None
    assert find_fork(new, old, proof) is None  # either order
    assert find_fork(new, new) is None


def test_same_size_different_roots_is_a_fork() -> None:
    honest, forked = signed_at(HONEST, 4), signed_at(FORKED, 4)
    evidence = find_fork(honest, forked)
    assert isinstance(evidence, ForkEvidence)
    assert {evidence.older.note, evidence.newer.note} == {honest.note, forked.note}
    assert evidence.proof == ()
    assert "size 4" in evidence.reason


def test_a_proof_that_fails_to_connect_the_roots_is_fork_evidence() -> None:
    old, new = signed_at(HONEST, 3), signed_at(FORKED, 6)
    proof = FORKED.consistency_proof(3, 6)  # what the forked log serves
    evidence = find_fork(new, old, proof)
    assert evidence is not None
    assert (evidence.older, evidence.newer) == (old, new)
    assert evidence.proof == tuple(proof)
    assert "root1 mismatch" in evidence.reason


def test_a_malformed_proof_is_not_evidence() -> None:
    old, new = signed_at(HONEST, 3), signed_at(FORKED, 6)
    with pytest.raises(ProofLengthError):
        find_fork(old, new, [])


def test_size_zero_checkpoints() -> None:
    empty = open_checkpoint(
        sign_checkpoint(Checkpoint(ORIGIN, 0, EMPTY_ROOT), LOG).encode(), ORIGIN, [LOG.verifier]
    )
    bogus = open_checkpoint(
        sign_checkpoint(Checkpoint(ORIGIN, 0, ROOT), LOG).encode(), ORIGIN, [LOG.verifier]
    )
    assert find_fork(empty, signed_at(HONEST, 6)) is None
    evidence = find_fork(bogus, signed_at(HONEST, 6))
    assert evidence is not None and "size 0" in evidence.reason
    assert find_fork(empty, bogus) is not None
    assert find_fork(bogus, empty) is not None


def test_checkpoints_of_different_logs_cannot_be_compared() -> None:
    other_log = Signer("gnau-dealer/other", Ed25519PrivateKey.from_private_bytes(b"\x09" * 32))
    with pytest.raises(CheckpointError, match="different logs"):
        find_fork(signed_at(HONEST, 3), signed_at(HONEST, 3, other_log, "gnau-dealer/other"))
