"""Keys, C2SP signed notes, checkpoints, key rotations and witness cosignatures (docs/audit.md,
Keys and names, Checkpoints, Key files and rotation, Every rejection: Signed notes; docs/witness.md,
Keys and cosignatures)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.independent.common import VerificationError, check, read_time, utf8

ED25519 = 0x01  # a signed-note signature type
COSIGNATURE_V1 = 0x04  # a witness's cosignature type
EM_DASH = "\u2014 "
MAX_SIGNATURES = 100
ORIGIN = re.compile(r"gnau-dealer/[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?")
ROTATION_HEADER = "gnau-dealer/key-rotation/v1"


@dataclass(frozen=True)
class Key:
    """A verifier key: its name, 4-byte ID, Ed25519 public key and signature type."""

    vkey: str
    name: str
    key_id: bytes
    public: bytes
    kind: int

    def verifies(self, signature: bytes, message: bytes) -> bool:
        if len(signature) != 64:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def canonical_b64(text: str, what: str) -> bytes:
    """Standard, padded, canonical base64 (no stray characters, no non-zero spare bits)."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError(f"{what} is not base64") from None
    check(base64.b64encode(data).decode() == text, f"{what} is not canonical base64")
    return data


def good_key_name(name: str) -> bool:
    return bool(name) and not any(
        c == "+" or c.isspace() or unicodedata.category(c) in ("Cc", "Zs", "Cs") for c in name
    )


def key_id(name: str, kind: int, public: bytes) -> bytes:
    return hashlib.sha256(utf8(name, "a key name") + b"\n" + bytes([kind]) + public).digest()[:4]


def read_vkey(text: object, kind: int = ED25519) -> Key:
    """``<name>+<key ID as 8 lower-case hex>+<base64(type || 32-byte public key)>``, split on the
    first two ``+`` only."""
    check(isinstance(text, str), "a verifier key is a string")
    assert isinstance(text, str)
    parts = text.split("+", 2)
    check(len(parts) == 3, f"{text!r:.60} is not a verifier key")
    name, hex_id, blob_text = parts
    check(good_key_name(name), f"{text!r:.60} has a bad key name")
    check(re.fullmatch(r"[0-9a-f]{8}", hex_id), f"{text!r:.60} has a bad key ID")
    blob = canonical_b64(blob_text, "a verifier key")
    check(len(blob) == 33 and blob[0] == kind, f"{text!r:.60} is not a key of type {kind:#04x}")
    public = blob[1:]
    check(key_id(name, kind, public).hex() == hex_id, f"{text!r:.60}: the key ID is not the key's")
    return Key(text, name, bytes.fromhex(hex_id), public, kind)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    blob: bytes  # after the key ID


@dataclass(frozen=True)
class Note:
    text: str  # the signed text, through the newline before the last blank line
    signatures: tuple[Signature, ...]


def parse_note(note: str) -> Note:
    """A C2SP signed note, strictly (docs/audit.md, Every rejection: Signed notes)."""
    utf8(note, "a signed note")
    check(
        all(c == "\n" or unicodedata.category(c) != "Cc" for c in note),
        "a signed note holds a control character",
    )
    check(note.endswith("\n"), "a signed note ends in a newline")
    cut = note.rfind("\n\n")
    check(cut >= 0, "a signed note has a blank line before its signatures")
    text, block = note[: cut + 1], note[cut + 2 :]
    check(block, "a signed note has signatures after its blank line")
    lines = block[:-1].split("\n")
    check(len(lines) <= MAX_SIGNATURES, "too many signature lines")
    signatures = []
    for line in lines:
        check(line.startswith(EM_DASH), "a signature line starts with an em dash and a space")
        name, space, blob_text = line[len(EM_DASH) :].partition(" ")
        check(space and good_key_name(name), "a signature line's key name is malformed")
        blob = canonical_b64(blob_text, "a signature")
        check(len(blob) > 4, "a signature is too short")
        signatures.append(Signature(name, blob[:4], blob[4:]))
    return Note(text, tuple(signatures))


def open_note(note: Note, keys: list[Key]) -> str:
    """The note's text, if a key of ``keys`` signed it: a signature by a known (name, key ID)
    that does not verify refuses the whole note; unknown signers are ignored."""
    signed = False
    for signature in note.signatures:
        for key in keys:
            if (key.name, key.key_id) == (signature.name, signature.key_id):
                message = note.text.encode()
                check(key.verifies(signature.blob, message), f"{key.name}'s signature is wrong")
                signed = True
    check(signed, "no trusted key signed the note")
    return note.text


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes


def parse_checkpoint(text: str) -> Checkpoint:
    """The body of a checkpoint: origin, size, root, optional extension lines."""
    check(text.endswith("\n"), "a checkpoint ends in a newline")
    lines = text[:-1].split("\n")
    check(len(lines) >= 3 and all(lines), "a checkpoint has an origin, a size, a root")
    origin, size, root = lines[:3]
    check(re.fullmatch(r"0|[1-9][0-9]*", size), "a checkpoint's size is not a decimal number")
    check(int(size) < 2**64, "a checkpoint's size is too large")
    digest = canonical_b64(root, "a checkpoint's root")
    check(len(digest) == 32, "a checkpoint's root is not 32 bytes")
    return Checkpoint(origin, int(size), digest)


def open_checkpoint(note_text: str, origin: str, keys: list[Key]) -> Checkpoint:
    note = parse_note(note_text)
    checkpoint = parse_checkpoint(note.text)
    check(checkpoint.origin == origin, f"a checkpoint of {checkpoint.origin!r:.60}, not {origin}")
    open_note(note, keys)
    return checkpoint


@dataclass(frozen=True)
class Rotation:
    old: Key
    new: Key
    time: datetime


def read_rotation(note_text: object, current: Key) -> Rotation:
    """A key rotation statement signed by ``current``, which it retires."""
    check(isinstance(note_text, str), "a rotation note is a string")
    assert isinstance(note_text, str)
    text = open_note(parse_note(note_text), [current])
    lines = text[:-1].split("\n")
    check(len(lines) == 4 and lines[0] == ROTATION_HEADER, "not a key rotation statement")
    _, old, new, time = lines
    check(old.startswith("old ") and new.startswith("new ") and time.startswith("time "), "labels")
    old_key, new_key = read_vkey(old[4:]), read_vkey(new[4:])
    check(old_key.vkey == current.vkey, "the rotation does not retire the current key")
    check(new_key.public != old_key.public, "a rotation to the same key")
    return Rotation(old_key, new_key, read_time(time[5:]))


@dataclass
class TrustedKey:
    key: Key
    since: datetime | None
    until: datetime | None


def trusted_keys(pinned: Key, rotations: list[object]) -> list[TrustedKey]:
    """The pinned key, then each key the rotations hand over to from it, in order, each later
    than the one before and none coming back; a broken chain hands over nothing."""
    chain = [TrustedKey(pinned, None, None)]
    try:
        for note in rotations:
            rotation = read_rotation(note, chain[-1].key)
            check(chain[-1].since is None or rotation.time > chain[-1].since, "out of order")
            check(all(t.key.vkey != rotation.new.vkey for t in chain), "a key comes back")
            chain[-1].until = rotation.time
            chain.append(TrustedKey(rotation.new, rotation.time, None))
    except VerificationError:
        return [TrustedKey(pinned, None, None)]
    return chain


def cosigners(note_text: str, witnesses: list[Key]) -> list[Key]:
    """The witnesses with a valid cosignature/v1 line on the checkpoint (docs/witness.md)."""
    note = parse_note(note_text)
    found: list[Key] = []
    for signature in note.signatures:
        for witness in witnesses:
            if (witness.name, witness.key_id) != (signature.name, signature.key_id):
                continue
            if len(signature.blob) != 72 or witness in found:
                continue
            time = int.from_bytes(signature.blob[:8], "big")
            message = f"cosignature/v1\ntime {time}\n{note.text}".encode()
            if time < 2**63 and witness.verifies(signature.blob[8:], message):
                found.append(witness)
    return found
