"""The log's Ed25519 key: key files, the log signer, and key rotation.

Key files are PKCS#8 PEM, unencrypted, mode 0600. Loading refuses a file that group or others may
access at all, because a leaked log key lets anyone forge entries and checkpoints.

A rotation ("key B replaces key A from time T") is a signed note, signed by A:

    gnau-dealer/key-rotation/v1
    old <vkey of A>
    new <vkey of B>
    time <RFC 3339 UTC>

A client pins one key and follows the chain of rotations with :func:`trusted_keys`. The header
line keeps a rotation from ever parsing as a checkpoint (whose second line is a number).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import Checkpoint, sign_checkpoint
from gnau_service.audit.note import (
    KeyFormatError,
    SignedNote,
    Signer,
    Verifier,
    sign_note,
)
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.common.private_files import KeyFileError, create_private_file, read_private_file

DEFAULT_KEY_FILENAME: Final = "log-signing-key.pem"
ROTATION_HEADER: Final = "gnau-dealer/key-rotation/v1"


class RotationError(ValueError):
    """A rotation statement that is malformed, or that breaks the chain from the pinned key."""


# --- Key files ------------------------------------------------------------------------------------


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load an unencrypted PKCS#8 PEM Ed25519 key, refusing it if group or others have access."""
    where = os.fspath(path)
    pem = read_private_file(where)
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:  # TypeError: the key is encrypted
        raise KeyFileError(f"key file {where} is not an unencrypted PEM key: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"key file {where} holds a {type(key).__name__}, not Ed25519")
    return key


@dataclass(frozen=True)
class KeyFile:
    """Where the key is, and whether :func:`ensure_private_key` just created it (log that)."""

    path: Path
    created: bool


def ensure_private_key(
    directory: str | os.PathLike[str], filename: str = DEFAULT_KEY_FILENAME
) -> KeyFile:
    """Create a new Ed25519 key file (mode 0600) in ``directory`` unless one is already there.

    The key is written and synced under a temporary name created with ``O_EXCL``, then linked to
    its final name, which fails rather than overwrite; so the key file appears whole or not at
    all, and an existing key (or one a concurrent process just created) is never replaced.
    """
    target = Path(directory) / filename
    if target.exists():
        return KeyFile(target, created=False)
    pem = private_key_pem(Ed25519PrivateKey.generate())
    return KeyFile(target, created=create_private_file(target, pem))


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """``key`` as a key file holds it: unencrypted PKCS#8 PEM, what :func:`load_private_key`
    reads."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


# --- The log signer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogSigner:
    """A log's identity: its origin and the key, named after the origin, that signs for it."""

    origin: str
    signer: Signer

    def __post_init__(self) -> None:
        if self.signer.name != self.origin:
            raise KeyFormatError(
                f"the log key is named {self.signer.name!r}; it must be named after the origin "
                f"{self.origin!r}"
            )

    @classmethod
    def from_private_key(cls, origin: str, private_key: Ed25519PrivateKey) -> LogSigner:
        return cls(origin, Signer(origin, private_key))

    @classmethod
    def from_key_file(cls, origin: str, path: str | os.PathLike[str]) -> LogSigner:
        return cls.from_private_key(origin, load_private_key(path))

    @property
    def verifier(self) -> Verifier:
        return self.signer.verifier

    @property
    def key_id(self) -> bytes:
        return self.signer.key_id

    @property
    def vkey(self) -> str:
        """The verifier key string clients pin, e.g. ``gnau-dealer/prod+1a2b3c4d+AT...``."""
        return self.signer.verifier.vkey

    def sign_checkpoint(self, size: int, root_hash: bytes) -> SignedNote:
        """The signed checkpoint of this log at ``size`` with ``root_hash``."""
        return sign_checkpoint(Checkpoint(self.origin, size, root_hash), self.signer)


# --- Key rotation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRotation:
    """The statement "``new`` replaces ``old`` from ``time``" (RFC 3339 UTC)."""

    old: Verifier
    new: Verifier
    time: str

    def __post_init__(self) -> None:
        parse_utc_timestamp(self.time)
        if self.old == self.new:
            raise RotationError("a rotation must change the key")

    def to_note_text(self) -> str:
        return f"{ROTATION_HEADER}\nold {self.old.vkey}\nnew {self.new.vkey}\ntime {self.time}\n"

    @classmethod
    def parse(cls, text: str) -> KeyRotation:
        lines = text.split("\n")
        if len(lines) != 5 or lines[0] != ROTATION_HEADER or lines[4] != "":
            raise RotationError(f"not a {ROTATION_HEADER} statement of four lines")
        values = []
        for line, label in zip(lines[1:4], ("old", "new", "time"), strict=True):
            prefix = label + " "
            if not line.startswith(prefix):
                raise RotationError(f"expected a line starting {prefix!r}, got {line[:40]!r}")
            values.append(line.removeprefix(prefix))
        old, new, time = values
        try:
            return cls(Verifier.from_vkey(old), Verifier.from_vkey(new), time)
        except ValueError as error:
            raise RotationError(f"rotation statement: {error}") from None

    def sign(self, old_signer: Signer, *also: Signer) -> SignedNote:
        """Sign with the old key (required), and optionally others such as the new key."""
        if old_signer.verifier != self.old:
            raise RotationError("a rotation must be signed by the key it replaces")
        return sign_note(self.to_note_text(), old_signer, *also)


@dataclass(frozen=True)
class TrustedKey:
    """A key in the chain and when it was current: ``since`` and ``until`` are rotation times
    (``None`` for the pinned key's start, and for the current key's end)."""

    verifier: Verifier
    since: str | None
    until: str | None


def trusted_keys(pinned: Verifier, rotations: Iterable[bytes | str]) -> tuple[TrustedKey, ...]:
    """Follow signed rotation notes from the pinned key: the keys in order, oldest first.

    Each rotation must be signed by the key current at that point and name it as ``old``, must be
    later than the rotation before it, and must not bring back a key already used. Raises
    :class:`RotationError` (or a :class:`~gnau_service.audit.note.NoteError` for a note that is
    malformed or not signed by the current key) at the first rotation that breaks the chain.
    """
    chain = [TrustedKey(pinned, None, None)]
    for number, data in enumerate(rotations, start=1):
        current = chain[-1]
        note = SignedNote.parse(data)
        note.verify([current.verifier])
        rotation = KeyRotation.parse(note.text)
        if rotation.old != current.verifier:
            raise RotationError(
                f"rotation {number} replaces {rotation.old.vkey}, but the current key is "
                f"{current.verifier.vkey}"
            )
        if any(key.verifier == rotation.new for key in chain):
            raise RotationError(
                f"rotation {number} brings back the earlier key {rotation.new.vkey}"
            )
        if current.since is not None and (
            parse_utc_timestamp(rotation.time) <= parse_utc_timestamp(current.since)
        ):
            raise RotationError(
                f"rotation {number} at {rotation.time} is not after the previous one at "
                f"{current.since}"
            )
        chain[-1] = TrustedKey(current.verifier, current.since, rotation.time)
        chain.append(TrustedKey(rotation.new, rotation.time, None))
    return tuple(chain)
