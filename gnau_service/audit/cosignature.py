"""C2SP tlog-cosignature (https://c2sp.org/tlog-cosignature), Ed25519 ``cosignature/v1``.

A cosignature is a witness's note signature on a checkpoint: the statement "as of this time, this
is the largest consistent tree I have seen for this log". It is an ordinary signature line,

    — <witness name> base64(key ID || timestamp || Ed25519 signature)

with three differences from a plain (type 0x01) note signature:

* the key ID is ``SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4]`` (type byte 0x04);
* the signature bytes are a ``timestamped_signature``: the 8-byte big-endian POSIX time (at most
  2**63 - 1) followed by the 64-byte Ed25519 signature;
* the signed message is not the note text but ``cosignature/v1\\n``, ``time <decimal>\\n`` and
  then the whole checkpoint body (the note text, with its final newline, no signature lines).

Witness public keys are vkeys of type 0x04 (a type 0x01 vkey is also read, as the same Ed25519 key
used for cosigning). Private keys are ``PRIVATE+KEY+<name>+<key ID>+base64(0x04 || 32-byte seed)``
strings, the form other witness software (Go ``transparency-dev/formats/note``) reads.

>>> key = WitnessKey.from_vkey(
...     "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2")
>>> key.name, key.key_id.hex()
('remora.n621.de', 'da77ade7')
>>> print(cosignature_message("example.com/behind-the-sofa\\n20852163\\n"
...     "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\\n", 1679315147).decode(), end="")
cosignature/v1
time 1679315147
example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.note import (
    ED25519_SIGNATURE_SIZE,
    ED25519_SIGNATURE_TYPE,
    KeyFormatError,
    NoteError,
    NoteSignature,
    SignedNote,
    check_ed25519_key,
    check_key_name,
    check_note_text,
    decode_base64,
    encode_base64,
    format_vkey,
    key_id,
    parse_vkey,
    verify_ed25519,
)

COSIGNATURE_V1_TYPE: Final = 0x04
COSIGNATURE_V1_HEADER: Final = "cosignature/v1"
TIMESTAMP_SIZE: Final = 8
MAX_TIMESTAMP: Final = 2**63 - 1
COSIGNATURE_V1_SIZE: Final = TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE
SKEY_PREFIX: Final = "PRIVATE+KEY+"
ED25519_SEED_SIZE: Final = 32


class CosignatureError(NoteError):
    """A cosignature, witness key or timestamp that is malformed."""


class QuorumError(NoteError):
    """A checkpoint with fewer valid cosignatures from the trusted witnesses than required."""


def check_timestamp(timestamp: int) -> None:
    """A cosignature time: a POSIX timestamp in 0..2**63-1 (the spec's upper bound)."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise CosignatureError(f"cosignature timestamp {timestamp} is not in 0..2**63-1")


def cosignature_message(checkpoint_body: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signature signs: header line, time line, checkpoint body.

    The time is ASCII decimal without leading zeros; the body is the note text including its
    final newline. Raises for a body that is not a signable note text or a time out of range.
    """
    check_note_text(checkpoint_body)
    check_timestamp(timestamp)
    header = f"{COSIGNATURE_V1_HEADER}\ntime {timestamp}\n"
    return (header + checkpoint_body).encode("utf-8")


def cosignature_timestamp(signature: NoteSignature) -> int:
    """The time in a ``cosignature/v1`` signature; raises if its bytes are not 8 + 64 long.

    The timestamp is not authenticated until :func:`verify_cosignature` has checked it.
    """
    if len(signature.signature) != COSIGNATURE_V1_SIZE:
        raise CosignatureError(
            f"cosignature by {signature.name!r} is {len(signature.signature)} bytes, "
            f"not {COSIGNATURE_V1_SIZE} (8-byte time and 64-byte Ed25519 signature)"
        )
    timestamp = int.from_bytes(signature.signature[:TIMESTAMP_SIZE], "big")
    check_timestamp(timestamp)
    return timestamp


@dataclass(frozen=True)
class WitnessKey:
    """A witness's name and Ed25519 public key: what a client pins to check cosignatures.

    >>> key = WitnessKey.from_vkey(
    ...     "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2")
    >>> key.vkey
    'remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2'
    """

    name: str
    public_key: bytes
    key_id: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_ed25519_key(self.name, self.public_key)
        object.__setattr__(self, "key_id", key_id(self.name, self.public_key, COSIGNATURE_V1_TYPE))

    @classmethod
    def from_vkey(cls, vkey: str) -> WitnessKey:
        """Parse a witness vkey: ``<name>+<key ID>+base64(0x04 || key)``.

        A plain note vkey (type 0x01, its own key ID) is accepted too, as Go witness tooling
        does: the same Ed25519 key then cosigns under its type 0x04 key ID.
        """
        name, _, public_key = parse_vkey(vkey, (COSIGNATURE_V1_TYPE, ED25519_SIGNATURE_TYPE))
        return cls(name, public_key)

    @property
    def vkey(self) -> str:
        """The type 0x04 verifier key string, as the witness publishes it."""
        return format_vkey(self.name, COSIGNATURE_V1_TYPE, self.public_key)

    def signed(self, signature: NoteSignature) -> bool:
        """Whether a signature line claims to be this key's: same name and same key ID."""
        return signature.name == self.name and signature.key_id == self.key_id


@dataclass(frozen=True)
class WitnessSigner:
    """A witness's name and Ed25519 private key, which cosigns checkpoints."""

    name: str
    private_key: Ed25519PrivateKey = field(repr=False, compare=False)
    key: WitnessKey = field(init=False)  # equality is by public key

    def __post_init__(self) -> None:
        public_key = self.private_key.public_key().public_bytes_raw()
        object.__setattr__(self, "key", WitnessKey(self.name, public_key))

    @classmethod
    def generate(cls, name: str) -> WitnessSigner:
        """A new witness key from the OS CSPRNG."""
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_skey(cls, skey: str) -> WitnessSigner:
        """Parse ``PRIVATE+KEY+<name>+<key ID>+base64(type || 32-byte seed)``, type 0x04 or 0x01.

        The key ID must be the one of the public key under the type the string carries. Error
        messages never quote the key material.
        """
        if not skey.startswith(SKEY_PREFIX):
            raise KeyFormatError("witness private key does not start with PRIVATE+KEY+")
        parts = skey.removeprefix(SKEY_PREFIX).split("+", 2)
        if len(parts) != 3:
            raise KeyFormatError("witness private key is not PRIVATE+KEY+name+keyid+key")
        name, id_hex, key_base64 = parts
        check_key_name(name)
        try:
            blob = decode_base64(key_base64)
        except ValueError:
            raise KeyFormatError(f"witness private key {name!r} is not canonical base64") from None
        kind = blob[0] if blob else None
        if kind not in (COSIGNATURE_V1_TYPE, ED25519_SIGNATURE_TYPE):
            raise KeyFormatError(f"witness private key {name!r} is not of type 0x04 or 0x01")
        if len(blob) != 1 + ED25519_SEED_SIZE:
            raise KeyFormatError(
                f"witness private key {name!r} must hold a {ED25519_SEED_SIZE}-byte Ed25519 seed"
            )
        signer = cls(name, Ed25519PrivateKey.from_private_bytes(blob[1:]))
        expected = key_id(name, signer.key.public_key, blob[0]).hex()
        if id_hex != expected:
            raise KeyFormatError(
                f"witness private key {name!r} says key ID {id_hex[:20]!r}, but the key's ID "
                f"is {expected}"
            )
        return signer

    @property
    def skey(self) -> str:
        """The private key string (type 0x04) that :meth:`from_skey` reads. Keep it secret."""
        seed = self.private_key.private_bytes_raw()
        blob = bytes([COSIGNATURE_V1_TYPE]) + seed
        return f"{SKEY_PREFIX}{self.name}+{self.key_id.hex()}+{encode_base64(blob)}"

    @property
    def key_id(self) -> bytes:
        return self.key.key_id

    @property
    def vkey(self) -> str:
        return self.key.vkey


def cosign(signer: WitnessSigner, checkpoint_body: str, timestamp: int) -> NoteSignature:
    """The ``cosignature/v1`` signature line of ``signer`` on a checkpoint, at ``timestamp``.

    Only a well-formed checkpoint body is cosigned (origin, size and root lines, then any
    extension lines): a witness states nothing about other texts.

    >>> seed = bytes(range(32))
    >>> witness = WitnessSigner("witness.example/w", Ed25519PrivateKey.from_private_bytes(seed))
    >>> body = "example.com/log\\n1\\n" + "A" * 43 + "=\\n"
    >>> line = cosign(witness, body, 1700000000)
    >>> verify_cosignature(witness.key, body, line)
    1700000000
    >>> verify_cosignature(witness.key, body.replace("1\\n", "2\\n", 1), line) is None
    True
    """
    Checkpoint.parse(checkpoint_body)
    message = cosignature_message(checkpoint_body, timestamp)
    signature = signer.private_key.sign(message)
    return NoteSignature(
        signer.name, signer.key_id, timestamp.to_bytes(TIMESTAMP_SIZE, "big") + signature
    )


def verify_cosignature(
    key: WitnessKey, checkpoint_body: str, signature: NoteSignature
) -> int | None:
    """The cosignature's time if ``signature`` is ``key``'s valid cosignature of the body.

    ``None`` for a line from another key (name or key ID differ), a malformed one (wrong length,
    time above 2**63-1) or one whose Ed25519 signature does not verify.
    """
    if not key.signed(signature):
        return None
    try:
        timestamp = cosignature_timestamp(signature)
        message = cosignature_message(checkpoint_body, timestamp)
    except NoteError:
        return None
    if not verify_ed25519(key.public_key, message, signature.signature[TIMESTAMP_SIZE:]):
        return None
    return timestamp


@dataclass(frozen=True)
class Cosigned:
    """A witness whose cosignature on a checkpoint verified, and the time it states."""

    key: WitnessKey
    timestamp: int


def cosigners(note: SignedNote, witnesses: Iterable[WitnessKey]) -> tuple[Cosigned, ...]:
    """The trusted witnesses that validly cosigned ``note``'s checkpoint, each counted once.

    Signatures from any other key (the log's own, unknown witnesses) are ignored, as the spec
    asks. A line that claims a trusted witness's name and key ID but does not verify is not
    counted either: it cannot help reach a quorum, and refusing the whole note for it would let
    whoever relays the note deny service by appending garbage. If a witness signed twice, its
    latest valid time is kept. The order is that of ``witnesses``.
    """
    best: dict[WitnessKey, int] = {}
    trusted = list(dict.fromkeys(witnesses))
    for signature in note.signatures:
        for key in trusted:
            timestamp = verify_cosignature(key, note.text, signature)
            if timestamp is not None and timestamp >= best.get(key, -1):
                best[key] = timestamp
    return tuple(Cosigned(key, best[key]) for key in trusted if key in best)


def require_quorum(
    note: SignedNote, witnesses: Iterable[WitnessKey], quorum: int
) -> tuple[Cosigned, ...]:
    """:func:`cosigners`, raising :class:`QuorumError` unless at least ``quorum`` cosigned.

    A quorum of 0 accepts any note (no witnesses required).
    """
    trusted = tuple(dict.fromkeys(witnesses))
    if not 0 <= quorum <= len(trusted):
        raise QuorumError(f"quorum {quorum} is not in 0..{len(trusted)} (the trusted witnesses)")
    valid = cosigners(note, trusted)
    if len(valid) < quorum:
        names = ", ".join(c.key.name for c in valid) or "none"
        raise QuorumError(
            f"checkpoint has {len(valid)} valid cosignatures from trusted witnesses "
            f"({names}), fewer than the quorum of {quorum}"
        )
    return valid


def with_cosignatures(note: SignedNote, signatures: Iterable[NoteSignature]) -> SignedNote:
    """``note`` with ``signatures`` appended after its own, skipping lines it already has."""
    lines = list(note.signatures)
    for signature in signatures:
        if signature not in lines:
            lines.append(signature)
    return SignedNote(note.text, tuple(lines))
