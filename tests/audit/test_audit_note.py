"""C2SP signed notes: the spec's example key and notes, round trips, and every malformation."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gnau_service.audit import note as note_module
from gnau_service.audit.note import (
    MAX_SIGNATURES,
    InvalidSignatureError,
    KeyFormatError,
    MalformedNoteError,
    NoteSignature,
    SignedNote,
    Signer,
    UnverifiedNoteError,
    Verifier,
    decode_base64,
    key_id,
    sign_note,
)

from .vectors import SIGNED_NOTE

SPEC_KEY: dict[str, Any] = SIGNED_NOTE["verifier_keys"][0]
SPEC_NOTES: list[dict[str, Any]] = SIGNED_NOTE["notes"]
EXAMPLE = SPEC_NOTES[0]
EXAMPLE_TEXT: str = EXAMPLE["note_text_full"]


def fixed_signer(name: str, seed: int) -> Signer:
    return Signer(name, Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32))


ALICE = fixed_signer("example.com/alice", 1)
BOB = fixed_signer("example.com/bob", 2)


# --- The spec's vectors ---------------------------------------------------------------------------


def test_spec_vkey_parses_to_the_published_key_and_id() -> None:
    verifier = Verifier.from_vkey(SPEC_KEY["vkey"])
    assert verifier.name == SPEC_KEY["key_name"]
    assert verifier.public_key.hex() == SPEC_KEY["ed25519_public_key_hex"]
    assert verifier.key_id.hex() == SPEC_KEY["key_id_hex"]
    assert verifier.vkey == SPEC_KEY["vkey"]


def test_key_id_is_sha256_of_name_newline_type_and_key() -> None:
    public_key = bytes.fromhex(SPEC_KEY["ed25519_public_key_hex"])
    expected = hashlib.sha256(b"example.com/foo\n\x01" + public_key).digest()[:4]
    assert key_id("example.com/foo", public_key) == expected == bytes.fromhex("530d903a")


def test_spec_example_note_verifies_with_the_spec_key() -> None:
    verifier = Verifier.from_vkey(EXAMPLE["verifier_key"])
    note = SignedNote.parse(EXAMPLE_TEXT.encode("utf-8"))
    assert note.text == EXAMPLE["signed_message"]
    assert note.verify([verifier]) == (verifier,)
    assert str(note) == EXAMPLE_TEXT


@pytest.mark.parametrize("note_vector", SPEC_NOTES, ids=lambda n: n["label"][:40])
def test_spec_notes_parse_into_their_published_parts(note_vector: dict[str, Any]) -> None:
    note = SignedNote.parse(note_vector["note_text_full"])
    assert note.text.encode("utf-8").hex() == note_vector["signed_message_hex"]
    assert len(note.signatures) == len(note_vector["signature_lines"])
    for signature, expected in zip(note.signatures, note_vector["signature_lines"], strict=True):
        assert signature.name == expected["key_name"]
        assert signature.key_id.hex() == expected["key_id_hex"]
        assert signature.signature.hex() == expected["signature_hex"]
        assert signature.line == expected["line"] + "\n"
    assert str(note) == note_vector["note_text_full"]


def test_spec_notes_without_a_published_key_verify_with_nothing_we_know() -> None:
    for note_vector in SPEC_NOTES[1:]:
        assert note_vector["verifier_key"] is None
        with pytest.raises(UnverifiedNoteError):
            SignedNote.parse(note_vector["note_text_full"]).verify([ALICE.verifier])


@pytest.mark.parametrize(
    "altered",
    [
        EXAMPLE_TEXT.replace("example message", "exemplary message"),
        EXAMPLE_TEXT.replace("message.\n", "message!\n"),
        "Extra line.\n" + EXAMPLE_TEXT,
    ],
)
def test_spec_signature_fails_on_altered_text(altered: str) -> None:
    with pytest.raises(InvalidSignatureError):
        SignedNote.parse(altered).verify([Verifier.from_vkey(SPEC_KEY["vkey"])])


# --- Round trips with generated keys --------------------------------------------------------------


def test_sign_and_verify_round_trip_with_blank_lines_in_the_text() -> None:
    text = "first\n\nthird, after a blank line\n\n"
    note = sign_note(text, ALICE, BOB)
    parsed = SignedNote.parse(note.encode())
    assert parsed == note
    assert parsed.text == text
    assert parsed.verify([BOB.verifier, ALICE.verifier]) == (ALICE.verifier, BOB.verifier)
    # The signature is a plain Ed25519 signature of the text: check it with the library directly.
    public = Ed25519PublicKey.from_public_bytes(ALICE.verifier.public_key)
    public.verify(parsed.signatures[0].signature, text.encode("utf-8"))


def test_vkeys_round_trip_even_when_the_base64_key_contains_a_plus() -> None:
    signers = [fixed_signer("gnau-dealer/test", seed) for seed in range(40)]
    assert any("+" in signer.verifier.vkey.split("+", 2)[2] for signer in signers)
    for signer in signers:
        assert Verifier.from_vkey(signer.verifier.vkey) == signer.verifier
        name, id_hex, key_b64 = signer.verifier.vkey.split("+", 2)
        assert (name, id_hex) == ("gnau-dealer/test", signer.key_id.hex())
        public_key = signer.private_key.public_key().public_bytes_raw()
        assert base64.b64decode(key_b64) == b"\x01" + public_key


def test_signatures_from_unknown_keys_are_ignored() -> None:
    note = SignedNote.parse(sign_note("hello\n", BOB, ALICE).encode())
    assert note.verify([ALICE.verifier]) == (ALICE.verifier,)


def test_a_note_signed_only_by_unknown_keys_is_rejected() -> None:
    with pytest.raises(UnverifiedNoteError, match=r"example\.com/bob"):
        sign_note("hello\n", BOB).verify([ALICE.verifier])


def test_a_key_sharing_only_the_name_or_only_the_id_is_unknown() -> None:
    impostor_same_name = fixed_signer(ALICE.name, 9)
    note = sign_note("hello\n", impostor_same_name)
    with pytest.raises(UnverifiedNoteError):
        note.verify([ALICE.verifier])
    same_id_other_name = NoteSignature("example.com/mallory", ALICE.key_id, b"\0" * 64)
    forged = SignedNote("hello\n", (same_id_other_name,))
    with pytest.raises(UnverifiedNoteError):
        forged.verify([ALICE.verifier])


def test_a_bad_signature_from_a_known_key_rejects_the_note() -> None:
    good = sign_note("hello\n", ALICE, BOB)
    bad_bob = NoteSignature(BOB.name, BOB.key_id, bytes(64))
    note = SignedNote(good.text, (good.signatures[0], bad_bob))
    assert note.verify([ALICE.verifier]) == (ALICE.verifier,)  # Bob unknown: ignored
    with pytest.raises(InvalidSignatureError, match=r"example\.com/bob"):
        note.verify([ALICE.verifier, BOB.verifier])


def test_a_truncated_signature_from_a_known_key_is_invalid() -> None:
    good = sign_note("hello\n", ALICE).signatures[0]
    short = NoteSignature(good.name, good.key_id, good.signature[:63])
    with pytest.raises(InvalidSignatureError):
        SignedNote("hello\n", (short,)).verify([ALICE.verifier])


def test_up_to_max_signatures_are_accepted() -> None:
    text = sign_note("hello\n", ALICE)
    lines = text.signatures[0].line * MAX_SIGNATURES
    assert len(SignedNote.parse("hello\n\n" + lines).signatures) == MAX_SIGNATURES
    with pytest.raises(MalformedNoteError, match="more than"):
        SignedNote.parse("hello\n\n" + lines + text.signatures[0].line)


def test_public_key_objects_are_cached() -> None:
    verifier = Verifier.from_vkey(SPEC_KEY["vkey"])
    note = SignedNote.parse(EXAMPLE_TEXT)
    before = note_module._ed25519_public_key.cache_info()
    for _ in range(5):
        note.verify([verifier])
    after = note_module._ed25519_public_key.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 5


# --- Malformed notes ------------------------------------------------------------------------------

GOOD = str(sign_note("hello\n", ALICE))
SIGNATURE_B64 = GOOD.rsplit(" ", maxsplit=1)[-1].removesuffix("\n")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(GOOD.replace("\u2014", "-"), "em dash", id="hyphen-for-em-dash"),
        pytest.param(GOOD.replace("\u2014", "\u2013"), "em dash", id="en-dash"),
        pytest.param(GOOD.replace("\u2014 ", "\u2014"), "em dash", id="no-space-after-dash"),
        pytest.param(GOOD.replace("\n", "\r\n"), "U\\+000D", id="crlf"),
        pytest.param(GOOD.removesuffix("\n"), "newline", id="no-final-newline"),
        pytest.param(GOOD.replace("hello\n\n", "hello\n"), "blank line", id="no-blank-line"),
        pytest.param("hello\n\n", "no signature lines", id="no-signatures"),
        pytest.param(GOOD + "\n", "no signature lines", id="trailing-blank-line"),
        pytest.param(GOOD.replace("hello", "hel\tlo"), "U\\+0009", id="tab-in-text"),
        pytest.param(GOOD.replace("hello", "hel\x00lo"), "U\\+0000", id="nul-in-text"),
        pytest.param(GOOD.encode("utf-8").replace(b"hello", b"hel\xfflo"), "UTF-8", id="bad-utf8"),
        pytest.param(
            GOOD.replace(SIGNATURE_B64, SIGNATURE_B64 + " "), "base64", id="trailing-space"
        ),
        pytest.param(GOOD.replace(SIGNATURE_B64, SIGNATURE_B64[:-1]), "base64", id="bad-padding"),
        pytest.param(GOOD.replace(SIGNATURE_B64, "!" + SIGNATURE_B64[1:]), "base64", id="not-b64"),
        pytest.param(GOOD.replace(SIGNATURE_B64, "AAAAAA=="), "too short", id="only-key-id"),
        pytest.param(GOOD.replace(ALICE.name + " ", "", 1), "no space", id="no-name"),
        pytest.param(GOOD.replace(ALICE.name, ""), "empty", id="empty-name"),
        pytest.param(GOOD.replace(ALICE.name, "a+b"), "plus", id="plus-in-name"),
        pytest.param(GOOD.replace(ALICE.name, "a\u00a0b"), "space", id="nbsp-in-name"),
    ],
)
def test_malformed_notes_are_rejected(data: str | bytes, reason: str) -> None:
    with pytest.raises(MalformedNoteError, match=reason):
        SignedNote.parse(data)


def test_non_canonical_base64_signature_is_rejected() -> None:
    blob = decode_base64(SIGNATURE_B64)
    assert len(blob) == 68  # 68 bytes: the last base64 group carries 2 spare bits
    last = SIGNATURE_B64[-2]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    sibling = alphabet[alphabet.index(last) ^ 1]  # same decoded bytes, different spare bits
    variant = SIGNATURE_B64[:-2] + sibling + "="
    assert base64.b64decode(variant) == blob
    with pytest.raises(MalformedNoteError, match="canonical"):
        SignedNote.parse(GOOD.replace(SIGNATURE_B64, variant))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no newline", "newline"),
        ("", "newline"),
        ("windows\r\n", "U\\+000D"),
        ("bell\x07\n", "U\\+0007"),
        ("lone \ud800 surrogate\n", "Unicode"),
    ],
)
def test_unsignable_texts_are_refused(text: str, reason: str) -> None:
    with pytest.raises(MalformedNoteError, match=reason):
        sign_note(text, ALICE)


@pytest.mark.parametrize(
    ("vkey", "reason"),
    [
        pytest.param(SPEC_KEY["vkey"].replace("530d903a", "530d903b"), "key's ID", id="wrong-id"),
        pytest.param(SPEC_KEY["vkey"].replace("530d903a", "530D903A"), "lower-case", id="upper"),
        pytest.param(SPEC_KEY["vkey"].replace("530d903a", "530d90"), "8 lower-case", id="short-id"),
        pytest.param(SPEC_KEY["vkey"].replace("+Aek", "+Bek"), "type 0x01", id="wrong-type"),
        pytest.param("example.com/foo+530d903a", "name\\+keyid\\+key", id="two-parts"),
        pytest.param(SPEC_KEY["vkey"] + "+x", "base64", id="plus-after-key"),
        pytest.param(
            "+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "empty", id="no-name"
        ),
        pytest.param("example.com/foo+530d903a+AekyeRrm", "32 bytes", id="short-key"),
        pytest.param("example.com/foo+530d903a+Aek=yeRrm", "base64", id="bad-base64"),
        pytest.param("example com+530d903a+AekyeRrm", "space", id="space-in-name"),
    ],
)
def test_malformed_vkeys_are_rejected(vkey: str, reason: str) -> None:
    with pytest.raises(KeyFormatError, match=reason):
        Verifier.from_vkey(vkey)


def test_signer_and_verifier_names_follow_the_key_name_rules() -> None:
    with pytest.raises(KeyFormatError):
        Signer("has space", Ed25519PrivateKey.generate())
    with pytest.raises(KeyFormatError):
        Verifier("ok", b"\0" * 31)
