"""Counting witness cosignatures on a checkpoint (C2SP tlog-cosignature, ``cosignature/v1``).

A client that pins witness keys trusts a checkpoint only once enough of those witnesses have
cosigned it: each cosignature says "this is the largest tree I have seen for this log, and it
is consistent with every earlier one". This module is the client's own small copy of the check
(the client does not depend on the service's package): a cosignature line is

    — <witness name> base64(key ID || 8-byte big-endian time || Ed25519 signature)

with key ID ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``, over the message
``cosignature/v1\\ntime <time>\\n`` followed by the checkpoint text (the note up to its blank
line). Lines from any other key are ignored; a line that claims a pinned key but does not verify
does not count.

It does not check the log's own signature: verify the checkpoint with the log's key too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

COSIGNATURE_TYPE: Final = 0x04
NOTE_KEY_TYPE: Final = 0x01  # a plain note vkey of the same Ed25519 key is read too
_DASH: Final = "\u2014 "


class QuorumError(ValueError):
    """A checkpoint with fewer valid cosignatures from the pinned witnesses than the quorum."""


@dataclass(frozen=True)
class Witness:
    """A pinned witness: its name and Ed25519 public key (from its vkey)."""

    name: str
    public_key: bytes

    @classmethod
    def from_vkey(cls, vkey: str) -> Witness:
        """``<name>+<8 hex key ID>+base64(0x04 || 32-byte key)`` (a type 0x01 vkey too)."""
        name, _, rest = vkey.strip().partition("+")
        id_hex, _, key_base64 = rest.partition("+")
        try:
            blob = base64.b64decode(key_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"witness key {name!r}: the key is not base64") from None
        if not name or len(blob) != 33 or blob[0] not in (COSIGNATURE_TYPE, NOTE_KEY_TYPE):
            raise ValueError(f"witness key {vkey[:60]!r} is not an Ed25519 vkey")
        if _key_id(name, blob[0], blob[1:]).hex() != id_hex:
            raise ValueError(f"witness key {name!r}: its key ID {id_hex!r} does not match the key")
        return cls(name, blob[1:])

    @property
    def key_id(self) -> bytes:
        return _key_id(self.name, COSIGNATURE_TYPE, self.public_key)

    def cosigned(self, text: str, line: str) -> int | None:
        """The time in ``line`` if it is this witness's valid cosignature of note ``text``."""
        name, _, encoded = line.removeprefix(_DASH).partition(" ")
        if not line.startswith(_DASH) or name != self.name:
            return None
        try:
            blob = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(blob) != 4 + 8 + 64 or blob[:4] != self.key_id:
            return None
        timestamp = int.from_bytes(blob[4:12], "big")
        if timestamp >= 2**63:
            return None
        message = f"cosignature/v1\ntime {timestamp}\n{text}".encode()
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(blob[12:], message)
        except InvalidSignature:
            return None
        return timestamp


def _key_id(name: str, kind: int, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public_key).digest()[:4]


def cosigners(note: str, witnesses: Iterable[Witness]) -> list[Witness]:
    """The pinned ``witnesses`` that validly cosigned the signed note ``note``, each once."""
    text, blank, signatures = note.rpartition("\n\n")
    if not blank:
        return []
    text += "\n"
    lines = signatures.splitlines()
    return [
        witness
        for witness in dict.fromkeys(witnesses)
        if any(witness.cosigned(text, line) is not None for line in lines)
    ]


@dataclass(frozen=True)
class WitnessPolicy:
    """The witnesses a client pins and how many of them must have cosigned a checkpoint."""

    witnesses: tuple[Witness, ...]
    quorum: int

    @classmethod
    def of(cls, witnesses: Iterable[str | Witness], quorum: int | None) -> WitnessPolicy:
        """From vkeys (or :class:`Witness`); ``quorum`` None means all of them."""
        pinned = tuple(w if isinstance(w, Witness) else Witness.from_vkey(w) for w in witnesses)
        return cls(pinned, len(pinned) if quorum is None else quorum)

    def check(self, note: str) -> str:
        """``note``, once :func:`require_quorum` has passed it."""
        require_quorum(note, self.witnesses, self.quorum)
        return note


def require_quorum(note: str, witnesses: Iterable[Witness], quorum: int) -> list[Witness]:
    """:func:`cosigners`, or :class:`QuorumError` if fewer than ``quorum`` of them."""
    pinned = list(dict.fromkeys(witnesses))
    if not 0 <= quorum <= len(pinned):
        raise QuorumError(f"quorum {quorum} is not between 0 and the {len(pinned)} witnesses")
    found = cosigners(note, pinned)
    if len(found) < quorum:
        names = ", ".join(witness.name for witness in found) or "none"
        raise QuorumError(
            f"the checkpoint has {len(found)} valid cosignatures from the pinned witnesses "
            f"({names}), fewer than the quorum of {quorum}"
        )
    return found
