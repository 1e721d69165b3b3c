"""The Python client's own cosignature check (gnau_client.cosignatures): the C2SP and Go vectors
for keys and key IDs, and agreement with the service's implementation
(gnau_service.audit.cosignature, written separately) on every note it cosigns or refuses."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gnau_client import QuorumError, Witness
from gnau_client.cosignatures import cosigners, require_quorum
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.checkpoint import Checkpoint, sign_checkpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign
from gnau_service.audit.cosignature import cosigners as service_cosigners
from gnau_service.audit.note import NoteSignature, SignedNote, Signer
from tests.audit.vectors import COSIGNATURE

LOG = Signer("gnau-dealer/test", Ed25519PrivateKey.from_private_bytes(bytes(32)))


def witness(name: str, seed: int) -> WitnessSigner:
    return WitnessSigner(name, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32))


WITNESSES = [witness(f"witness.test/w{n}", n) for n in (1, 2, 3)]


def note_cosigned_by(
    signers: list[WitnessSigner], size: int = 7, timestamp: int = 1_700_000_000
) -> str:
    signed = sign_checkpoint(Checkpoint(LOG.name, size, bytes(range(32))), LOG)
    lines = [cosign(signer, signed.text, timestamp) for signer in signers]
    return str(SignedNote(signed.text, signed.signatures + tuple(lines)))


@pytest.mark.parametrize("case", COSIGNATURE["go_vkeys"], ids=lambda case: case["note"])
def test_go_vkeys(case: dict[str, Any]) -> None:
    if case["valid"]:
        Witness.from_vkey(case["vkey"])
    else:
        with pytest.raises(ValueError):
            Witness.from_vkey(case["vkey"])


def test_a_native_vkey_keeps_its_key_id_and_a_type_01_key_takes_the_0x04_one() -> None:
    native = Witness.from_vkey(
        "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
    )
    assert native.key_id.hex() == "da77ade7"
    plain = Witness.from_vkey("TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6")
    # By hand, from the spec: SHA-256(name || 0x0A || 0x04 || key)[:4].
    expected = hashlib.sha256(b"TEST\n\x04" + plain.public_key).digest()[:4]
    assert plain.key_id == expected != bytes.fromhex("7997405c")


def test_the_spec_examples_cosignature_is_framed_as_the_spec_says() -> None:
    example = COSIGNATURE["spec_example"]
    blob = base64.b64decode(example["cosignature_line"].split(" ")[2])
    assert blob[:4].hex() == example["cosignature_key_id_hex"]
    assert int.from_bytes(blob[4:12], "big") == example["cosignature_timestamp"]


def test_quorum_two_of_three_refuses_a_note_one_witness_cosigned() -> None:
    pinned = [Witness.from_vkey(w.vkey) for w in WITNESSES]
    note = note_cosigned_by(WITNESSES[:1])
    with pytest.raises(QuorumError, match=r"1 valid cosignatures .* fewer than the quorum of 2"):
        require_quorum(note, pinned, 2)
    assert require_quorum(note, pinned, 1) == pinned[:1]
    assert require_quorum(note_cosigned_by(WITNESSES[:2]), pinned, 2) == pinned[:2]
    with pytest.raises(QuorumError, match="not between 0 and the 3"):
        require_quorum(note, pinned, 4)


def test_unknown_duplicate_and_forged_lines_do_not_count() -> None:
    pinned = [Witness.from_vkey(WITNESSES[0].vkey)]
    stranger = witness("witness.test/w1", 9)  # same name, another key: another key ID
    assert cosigners(note_cosigned_by([stranger]), pinned) == []
    assert cosigners(note_cosigned_by([WITNESSES[0], WITNESSES[0]]), pinned) == pinned
    note = SignedNote.parse(note_cosigned_by(WITNESSES[:1]))
    good = note.signatures[1]
    forged = NoteSignature(good.name, good.key_id, good.signature[:-1] + b"\x00")
    assert cosigners(str(SignedNote(note.text, (note.signatures[0], forged))), pinned) == []
    # Another checkpoint's cosignature on this text: the text is what is signed.
    other = SignedNote.parse(note_cosigned_by(WITNESSES[:1], size=8))
    moved = SignedNote(note.text, (note.signatures[0], other.signatures[1]))
    assert cosigners(str(moved), pinned) == []


@settings(max_examples=40, deadline=None)
@given(
    chosen=st.lists(st.sampled_from([0, 1, 2]), max_size=4),
    size=st.integers(0, 2**64 - 1),
    timestamp=st.integers(0, 2**63 - 1),
    flip=st.one_of(st.none(), st.integers(0, 200)),
)
def test_the_client_counts_as_the_service_does(
    chosen: list[int], size: int, timestamp: int, flip: int | None
) -> None:
    note = note_cosigned_by([WITNESSES[n] for n in chosen], size, timestamp)
    if flip is not None:  # one character of the text or of a signature changed
        position = flip % (len(note) - 1)
        replaced = "A" if note[position] != "A" else "B"
        if note[position] not in "\n\u2014 ":
            note = note[:position] + replaced + note[position + 1 :]
    try:
        parsed = SignedNote.parse(note)
    except ValueError:
        return  # not a note at all: nothing to compare
    service = {c.key.name for c in service_cosigners(parsed, [w.key for w in WITNESSES])}
    client = {w.name for w in cosigners(note, [Witness.from_vkey(w.vkey) for w in WITNESSES])}
    assert client == service
