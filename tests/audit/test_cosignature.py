"""tlog-cosignature v1: the spec's and Go's vectors, byte-exact messages, keys, and quorums.

Expected bytes are built here by hand from the spec's wording (the message lines, the key ID
preimage, the big-endian time) and checked with pyca/cryptography directly, never with the code
under test.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.audit.checkpoint import Checkpoint, CheckpointError, sign_checkpoint
from gnau_service.audit.cosignature import (
    CosignatureError,
    Cosigned,
    QuorumError,
    WitnessKey,
    WitnessSigner,
    cosign,
    cosignature_message,
    cosignature_timestamp,
    cosigners,
    require_quorum,
    verify_cosignature,
    with_cosignatures,
)
from gnau_service.audit.note import (
    KeyFormatError,
    NoteSignature,
    SignedNote,
    Signer,
    Verifier,
)

from .vectors import COSIGNATURE

EXAMPLE: dict[str, Any] = COSIGNATURE["spec_example"]
BODY: str = EXAMPLE["checkpoint_body"]


def witness(name: str, seed: int) -> WitnessSigner:
    return WitnessSigner(name, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32))


W1 = witness("witness.example/w1", 1)
W2 = witness("witness.example/w2", 2)
W3 = witness("witness.example/w3", 3)
LOG = Signer("example.com/behind-the-sofa", Ed25519PrivateKey.from_private_bytes(b"\x09" * 32))


def hand_key_id(name: str, public_key: bytes, kind: int = 4) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public_key).digest()[:4]


# --- The spec's and Go's vectors -----------------------------------------------------------------


def test_spec_example_message_is_header_time_line_and_body() -> None:
    assert cosignature_message(BODY, EXAMPLE["cosignature_timestamp"]) == (
        EXAMPLE["signed_message"].encode()
    )


def test_spec_example_cosignature_line_frames_key_id_and_time() -> None:
    note = SignedNote.parse(
        BODY + "\n" + EXAMPLE["log_signature_line"] + "\n" + EXAMPLE["cosignature_line"] + "\n"
    )
    cosignature = note.signatures[1]
    assert cosignature.name == "witness.example.com/w1"
    assert cosignature.key_id.hex() == EXAMPLE["cosignature_key_id_hex"]
    assert cosignature_timestamp(cosignature) == EXAMPLE["cosignature_timestamp"]
    # No public key is published for it: an unknown cosigner is ignored, never an error.
    assert cosigners(note, [W1.key]) == ()


@pytest.mark.parametrize("case", COSIGNATURE["go_vkeys"], ids=lambda case: case["note"])
def test_go_vkeys(case: dict[str, Any]) -> None:
    if not case["valid"]:
        with pytest.raises(KeyFormatError):
            WitnessKey.from_vkey(case["vkey"])
        return
    key = WitnessKey.from_vkey(case["vkey"])
    name, _, blob = case["vkey"].split("+", 2)
    public_key = base64.b64decode(blob)[1:]
    assert (key.name, key.public_key) == (name, public_key)
    assert key.key_id == hand_key_id(name, public_key)
    assert (
        key.vkey
        == f"{name}+{hand_key_id(name, public_key).hex()}+"
        + base64.b64encode(b"\x04" + public_key).decode()
    )


def test_native_go_vkey_keeps_its_published_id() -> None:
    assert WitnessKey.from_vkey(COSIGNATURE["go_vkeys"][0]["vkey"]).key_id.hex() == "da77ade7"


@pytest.mark.parametrize("case", COSIGNATURE["go_timestamps"])
def test_go_timestamps(case: dict[str, Any]) -> None:
    blob = base64.b64decode(case["signature_base64"])
    signature = NoteSignature("example.com/w", blob[:4], blob[4:])
    if case["timestamp"] is None:
        with pytest.raises(CosignatureError, match="not 72"):
            cosignature_timestamp(signature)
    else:
        assert cosignature_timestamp(signature) == case["timestamp"]


# --- Signing, byte for byte -----------------------------------------------------------------------


def test_cosignature_is_time_then_ed25519_over_the_spec_message() -> None:
    line = cosign(W1, BODY, 1679315147)
    assert line.name == W1.name
    assert line.key_id == hand_key_id(W1.name, W1.key.public_key)
    assert line.signature[:8] == bytes.fromhex("000000006418 50cb".replace(" ", ""))
    message = (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    Ed25519PublicKey.from_public_bytes(W1.key.public_key).verify(line.signature[8:], message)
    assert line.line.startswith("\u2014 witness.example/w1 ")


def test_time_line_has_no_leading_zeros_and_zero_is_zero() -> None:
    assert cosignature_message(BODY, 0).startswith(b"cosignature/v1\ntime 0\nexample.com/")
    assert cosignature_message(BODY, 7).startswith(b"cosignature/v1\ntime 7\n")


def test_timestamp_bounds() -> None:
    top = cosign(W1, BODY, 2**63 - 1)
    assert top.signature[:8] == b"\x7f" + b"\xff" * 7
    assert verify_cosignature(W1.key, BODY, top) == 2**63 - 1
    for bad in (-1, 2**63):
        with pytest.raises(CosignatureError):
            cosign(W1, BODY, bad)
    # A time above 2**63-1 is refused even under a valid signature over its message.
    over = 2**63
    forged_message = f"cosignature/v1\ntime {over}\n{BODY}".encode()
    forged = NoteSignature(
        W1.name, W1.key_id, over.to_bytes(8, "big") + W1.private_key.sign(forged_message)
    )
    assert verify_cosignature(W1.key, BODY, forged) is None


def test_extension_lines_are_signed() -> None:
    body = BODY + "extension line\n"
    line = cosign(W1, body, 1)
    assert verify_cosignature(W1.key, body, line) == 1
    assert verify_cosignature(W1.key, body.replace("extension", "Extension"), line) is None
    assert verify_cosignature(W1.key, BODY, line) is None


@pytest.mark.parametrize(
    "body", ["not a checkpoint\n", BODY.rstrip("\n"), "origin\n01\n" + "A" * 43 + "=\n"]
)
def test_only_checkpoint_bodies_are_cosigned(body: str) -> None:
    with pytest.raises((CheckpointError, ValueError)):
        cosign(W1, body, 1)


# --- Verifying -----------------------------------------------------------------------------------


def test_verify_refuses_every_altered_part() -> None:
    line = cosign(W1, BODY, 1000)
    assert verify_cosignature(W1.key, BODY, line) == 1000
    sig = line.signature
    altered = {
        "time": NoteSignature(line.name, line.key_id, (1001).to_bytes(8, "big") + sig[8:]),
        "signature": NoteSignature(line.name, line.key_id, sig[:-1] + bytes([sig[-1] ^ 1])),
        "short": NoteSignature(line.name, line.key_id, sig[:-1]),
        "key ID": NoteSignature(line.name, b"\x00" * 4, sig),
        "name": NoteSignature("witness.example/other", line.key_id, sig),
    }
    for what, signature in altered.items():
        assert verify_cosignature(W1.key, BODY, signature) is None, what
    assert verify_cosignature(W2.key, BODY, line) is None
    assert verify_cosignature(W1.key, BODY.replace("20852163", "20852164"), line) is None


def test_a_plain_note_signature_by_the_same_key_is_not_a_cosignature() -> None:
    plain = Signer(W1.name, W1.private_key)
    assert plain.key_id == hand_key_id(W1.name, W1.key.public_key, kind=1) != W1.key_id
    note = SignedNote(BODY, (NoteSignature(plain.name, plain.key_id, plain.sign(BODY.encode())),))
    assert cosigners(note, [W1.key]) == ()


def test_a_cosignature_is_not_a_plain_note_signature() -> None:
    """A verifier of 0x01 note signatures ignores a cosignature (its key ID differs)."""
    note = with_cosignatures(sign_checkpoint(Checkpoint.parse(BODY), LOG), [cosign(W1, BODY, 5)])
    assert note.verify([LOG.verifier, Verifier(W1.name, W1.key.public_key)]) == (LOG.verifier,)


@given(
    timestamp=st.integers(0, 2**63 - 1),
    size=st.integers(0, 2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
)
def test_round_trip_and_note_serialisation(timestamp: int, size: int, root: bytes) -> None:
    body = Checkpoint("example.com/log", size, root).to_note_text()
    line = cosign(W2, body, timestamp)
    reparsed = SignedNote.parse(body + "\n" + line.line)
    assert cosigners(reparsed, [W1.key, W2.key]) == (Cosigned(W2.key, timestamp),)


# --- Keys -----------------------------------------------------------------------------------------


def test_skey_round_trip_and_form() -> None:
    skey = W1.skey
    prefix, kind_and_seed = skey.rsplit("+", 1)
    assert prefix == f"PRIVATE+KEY+{W1.name}+{hand_key_id(W1.name, W1.key.public_key).hex()}"
    assert base64.b64decode(kind_and_seed) == b"\x04" + b"\x01" * 32
    assert WitnessSigner.from_skey(skey) == W1
    assert WitnessSigner.from_skey(skey).vkey == W1.vkey


def test_type_01_skey_is_read_as_the_same_key() -> None:
    public_key = W1.key.public_key
    plain = f"PRIVATE+KEY+{W1.name}+{hand_key_id(W1.name, public_key, 1).hex()}+" + (
        base64.b64encode(b"\x01" + b"\x01" * 32).decode()
    )
    assert WitnessSigner.from_skey(plain).key == W1.key


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace("PRIVATE+KEY+", "PRIVATE+"), "PRIVATE\\+KEY"),
        (lambda s: s.rsplit("+", 1)[0], "name\\+keyid\\+key"),
        (lambda s: s + "=", "base64"),
        (lambda s: s.replace("+BA", "+Aw"), "type"),
        (lambda s: s.replace(s.split("+")[3], "00000000"), "key ID"),
    ],
)
def test_bad_skeys_are_refused_without_quoting_the_seed(edit: Any, message: str) -> None:
    bad = edit(W1.skey)
    with pytest.raises(KeyFormatError, match=message) as caught:
        WitnessSigner.from_skey(bad)
    assert bad.rsplit("+", 1)[1][:12] not in str(caught.value)


def test_vkey_with_wrong_id_or_length_is_refused() -> None:
    name, _, blob = W1.vkey.split("+", 2)
    with pytest.raises(KeyFormatError, match="key ID"):
        WitnessKey.from_vkey(f"{name}+00000000+{blob}")
    short = base64.b64encode(b"\x04" + b"\x01" * 31).decode()
    short_id = hand_key_id(name, b"\x01" * 31).hex()
    with pytest.raises(KeyFormatError, match="32 bytes"):
        WitnessKey.from_vkey(f"{name}+{short_id}+{short}")


def test_generated_keys_differ_and_round_trip() -> None:
    first, second = WitnessSigner.generate("w.example/a"), WitnessSigner.generate("w.example/a")
    assert first.key != second.key
    assert WitnessKey.from_vkey(first.vkey) == first.key


# --- Counting cosigners and quorums ---------------------------------------------------------------


def cosigned_note(*lines: NoteSignature) -> SignedNote:
    return with_cosignatures(sign_checkpoint(Checkpoint.parse(BODY), LOG), lines)


def test_cosigners_counts_each_trusted_witness_once_and_ignores_the_rest() -> None:
    stranger = witness("stranger.example/w", 7)
    note = cosigned_note(
        cosign(W1, BODY, 10), cosign(W1, BODY, 12), cosign(stranger, BODY, 11), cosign(W2, BODY, 9)
    )
    assert cosigners(note, [W2.key, W1.key, W3.key, W1.key]) == (
        Cosigned(W2.key, 9),
        Cosigned(W1.key, 12),
    )


def test_a_bad_line_from_a_trusted_witness_does_not_count_and_does_not_hide_a_good_one() -> None:
    good = cosign(W1, BODY, 10)
    bad = NoteSignature(good.name, good.key_id, good.signature[:-1] + b"\x00")
    assert cosigners(cosigned_note(bad), [W1.key]) == ()
    assert cosigners(cosigned_note(bad, good), [W1.key]) == (Cosigned(W1.key, 10),)


def test_quorum_two_of_three_refuses_one_cosignature() -> None:
    trusted = [W1.key, W2.key, W3.key]
    refusal = (
        r"1 valid cosignatures from trusted witnesses \(witness\.example/w1\), "
        r"fewer than the quorum of 2"
    )
    with pytest.raises(QuorumError, match=refusal):
        require_quorum(cosigned_note(cosign(W1, BODY, 1)), trusted, 2)
    both = require_quorum(cosigned_note(cosign(W1, BODY, 1), cosign(W3, BODY, 2)), trusted, 2)
    assert [c.key for c in both] == [W1.key, W3.key]


def test_quorum_must_be_reachable() -> None:
    note = cosigned_note(cosign(W1, BODY, 1))
    assert require_quorum(note, [], 0) == ()
    with pytest.raises(QuorumError, match=r"not in 0\.\.1"):
        require_quorum(note, [W1.key, W1.key], 2)
    with pytest.raises(QuorumError, match="not in"):
        require_quorum(note, [W1.key], -1)


def test_with_cosignatures_keeps_existing_lines_once() -> None:
    line = cosign(W1, BODY, 3)
    note = with_cosignatures(cosigned_note(line), [line, cosign(W2, BODY, 4)])
    assert [s.name for s in note.signatures] == [LOG.name, W1.name, W2.name]


# --- An independent implementation's output -------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    COSIGNATURE["independent_implementation"]["cases"],
    ids=lambda case: case["name"],
)
def test_independent_implementation_vectors(case: dict[str, Any]) -> None:
    """aics-tlog's cosignatures verify here, and ours are the same bytes (extension lines, the
    largest time and size, an OID name included)."""
    signer = WitnessSigner(
        case["name"], Ed25519PrivateKey.from_private_bytes(bytes.fromhex(case["seed_hex"]))
    )
    assert signer.vkey == case["vkey"]
    theirs = NoteSignature.parse(case["signature_line"])
    key = WitnessKey.from_vkey(case["vkey"])
    assert verify_cosignature(key, case["checkpoint_body"], theirs) == case["timestamp"]
    ours = cosign(signer, case["checkpoint_body"], case["timestamp"])
    assert ours.line == case["signature_line"] + "\n"
