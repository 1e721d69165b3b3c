"""C2SP signed-note (https://c2sp.org/signed-note) with Ed25519 keys, signature type 0x01.

A signed note is a text ending in a newline, a blank line, then one or more signature lines
``— <key name> base64(key ID || signature)`` (the dash is U+2014 EM DASH). The text is everything
up to the *last* blank line, so the text itself may contain blank lines. A key is named; its
4-byte ID is ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``; verifiers know keys by the pair
(name, ID) and ignore signatures from any other key.

>>> verifier = Verifier.from_vkey(
...     "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
... )
>>> note = SignedNote.parse(
...     "This is an example message.\\n\\n"
...     "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZX"
...     "sYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\\n"
... )
>>> note.text
'This is an example message.\\n'
>>> [key.name for key in note.verify([verifier])]
['example.com/foo']
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gnau_service.audit import ed25519_signing

ED25519_SIGNATURE_TYPE: Final = 0x01
ED25519_PUBLIC_KEY_SIZE: Final = 32
ED25519_SIGNATURE_SIZE: Final = 64
KEY_ID_SIZE: Final = 4
SIGNATURE_PREFIX: Final = "\u2014 "  # em dash, space
# The spec asks verifiers to cap the signatures they read and to accept at least 16.
MAX_SIGNATURES: Final = 100

_CONTROL_BUT_NEWLINE: Final = re.compile("[\x00-\x09\x0b-\x1f]")


class NoteError(ValueError):
    """A note, key or signature that is refused. The message says which rule it breaks."""


class MalformedNoteError(NoteError):
    """Bytes that are not a well-formed signed note (or note text that cannot be signed)."""


class KeyFormatError(NoteError):
    """A key name, verifier key string or public key that is not valid."""


class UnverifiedNoteError(NoteError):
    """A note with no signature from any known key."""


class InvalidSignatureError(NoteError):
    """A signature from a known key that does not verify: the whole note is rejected."""


def decode_base64(text: str) -> bytes:
    """Standard padded base64 (RFC 4648 section 4), in its one canonical spelling only.

    Rejecting other spellings (missing padding, non-zero spare bits, whitespace) keeps each value
    to exactly one text form.

    >>> decode_base64("AAE=")
    b'\\x00\\x01'
    >>> decode_base64("AAF=")
    Traceback (most recent call last):
    ...
    ValueError: 'AAF=' is not canonical base64
    """
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{text[:60]!r} is not canonical base64") from None
    if base64.b64encode(decoded).decode("ascii") != text:
        raise ValueError(f"{text[:60]!r} is not canonical base64")
    return decoded


def encode_base64(data: bytes) -> str:
    """Standard padded base64, as text."""
    return base64.b64encode(data).decode("ascii")


def check_key_name(name: str) -> None:
    """Key names must be non-empty, with no Unicode space, no ``+`` and no control character."""
    if not name:
        raise KeyFormatError("key name is empty")
    if any(char.isspace() or char == "+" or char < " " for char in name):
        raise KeyFormatError(
            f"key name {name!r} contains a space, a plus sign or a control character"
        )


def check_note_text(text: str) -> None:
    """A signable note text: non-empty, ends in a newline, no control character but newline.

    >>> check_note_text("origin\\r\\n")
    Traceback (most recent call last):
    ...
    gnau_service.audit.note.MalformedNoteError: note contains control character U+000D at offset 6
    """
    if not text.endswith("\n"):
        raise MalformedNoteError("note text must end in a newline")
    _check_characters(text)


def _check_characters(text: str) -> None:
    if control := _CONTROL_BUT_NEWLINE.search(text):
        raise MalformedNoteError(
            f"note contains control character U+{ord(control.group()):04X} "
            f"at offset {control.start()}"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate has no UTF-8 form
        raise MalformedNoteError(f"note is not valid Unicode: {error.reason}") from error


def key_id(name: str, public_key: bytes, signature_type: int = ED25519_SIGNATURE_TYPE) -> bytes:
    """``SHA-256(name || 0x0A || type || public key)[:4]``: the ID of a note key.

    The type byte is 0x01 for plain Ed25519 note keys; other formats that reuse the signed-note
    framing (tlog-cosignature's 0x04, say) pass their own.
    """
    material = name.encode("utf-8") + b"\n" + bytes([signature_type]) + public_key
    return hashlib.sha256(material).digest()[:KEY_ID_SIZE]


def format_vkey(name: str, signature_type: int, public_key: bytes) -> str:
    """``<name>+<8 hex digits of key ID>+<base64(type || public key)>``: a verifier key string.

    >>> vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
    >>> format_vkey("example.com/foo", 1, Verifier.from_vkey(vkey).public_key) == vkey
    True
    """
    check_key_name(name)
    blob = bytes([signature_type]) + public_key
    return f"{name}+{key_id(name, public_key, signature_type).hex()}+{encode_base64(blob)}"


def parse_vkey(vkey: str, signature_types: Iterable[int]) -> tuple[str, int, bytes]:
    """Split a verifier key string into (name, signature type, public key), checking its key ID.

    ``signature_types`` are the type bytes the caller accepts; the key ID in the string must be
    the one computed with the type the string itself carries.
    """
    parts = vkey.split("+", 2)  # the base64 key may itself contain "+"
    if len(parts) != 3:
        raise KeyFormatError(f"verifier key {vkey[:80]!r} is not name+keyid+key")
    name, id_hex, key_base64 = parts
    check_key_name(name)
    if len(id_hex) != 2 * KEY_ID_SIZE or not all(c in "0123456789abcdef" for c in id_hex):
        raise KeyFormatError(f"key ID {id_hex[:20]!r} is not 8 lower-case hex digits")
    try:
        blob = decode_base64(key_base64)
    except ValueError as error:
        raise KeyFormatError(f"verifier key {name!r}: {error}") from None
    accepted = tuple(signature_types)
    if not blob or blob[0] not in accepted:
        wanted = " or ".join(f"0x{kind:02x}" for kind in accepted)
        raise KeyFormatError(f"verifier key {name!r} is not of signature type {wanted}")
    signature_type, public_key = blob[0], blob[1:]
    if len(public_key) != ED25519_PUBLIC_KEY_SIZE:
        raise KeyFormatError(
            f"verifier key {name!r}: public key must be {ED25519_PUBLIC_KEY_SIZE} bytes, "
            f"got {len(public_key)}"
        )
    actual = key_id(name, public_key, signature_type).hex()
    if actual != id_hex:
        raise KeyFormatError(
            f"verifier key {name!r} says key ID {id_hex}, but the key's ID is {actual}"
        )
    return name, signature_type, public_key


def check_ed25519_key(name: str, public_key: bytes) -> None:
    """A valid key name and a 32-byte Ed25519 public key that decodes (then cached for use)."""
    check_key_name(name)
    if len(public_key) != ED25519_PUBLIC_KEY_SIZE:
        raise KeyFormatError(
            f"Ed25519 public key must be {ED25519_PUBLIC_KEY_SIZE} bytes, got {len(public_key)}"
        )
    _ed25519_public_key(public_key)  # fail early, and warm the cache


def verify_ed25519(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the raw Ed25519 signature of ``message`` by ``public_key``."""
    if len(signature) != ED25519_SIGNATURE_SIZE:
        return False
    try:
        _ed25519_public_key(public_key).verify(signature, message)
    except InvalidSignature:
        return False
    return True


@functools.lru_cache(maxsize=1024)
def _ed25519_public_key(raw: bytes) -> Ed25519PublicKey:
    # A verification with a freshly built key object costs about a quarter more than with a
    # reused one (measured here; pyca/cryptography#9463), so every key object is built once.
    return Ed25519PublicKey.from_public_bytes(raw)


@dataclass(frozen=True)
class Verifier:
    """A named Ed25519 public key that checks note signatures.

    >>> vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
    >>> verifier = Verifier.from_vkey(vkey)
    >>> verifier.key_id.hex(), verifier.public_key.hex()[:8], verifier.vkey == vkey
    ('530d903a', 'e932791a', True)
    """

    name: str
    public_key: bytes
    key_id: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_ed25519_key(self.name, self.public_key)
        object.__setattr__(self, "key_id", key_id(self.name, self.public_key))

    @classmethod
    def from_vkey(cls, vkey: str) -> Verifier:
        """Parse ``<name>+<8 hex digits of key ID>+<base64(0x01 || 32-byte public key)>``."""
        name, _, public_key = parse_vkey(vkey, (ED25519_SIGNATURE_TYPE,))
        return cls(name, public_key)

    @property
    def vkey(self) -> str:
        """The verifier key string, as published for clients to pin."""
        return format_vkey(self.name, ED25519_SIGNATURE_TYPE, self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        return verify_ed25519(self.public_key, message, signature)


@dataclass(frozen=True)
class Signer:
    """A named Ed25519 private key that signs notes (and, in this package, log entries)."""

    name: str
    private_key: Ed25519PrivateKey = field(repr=False, compare=False)
    verifier: Verifier = field(init=False)  # equality is by public key
    #: The key in libsodium's form, which signs (see :mod:`~gnau_service.audit.ed25519_signing`).
    _secret: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        public_key = self.private_key.public_key().public_bytes_raw()
        object.__setattr__(self, "verifier", Verifier(self.name, public_key))
        object.__setattr__(self, "_secret", ed25519_signing.secret_key(self.private_key))

    @property
    def key_id(self) -> bytes:
        return self.verifier.key_id

    def sign(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of ``message`` (byte for byte what
        ``private_key.sign`` gives, in about two thirds of the time)."""
        return ed25519_signing.sign(self._secret, message)


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: key name, 4-byte key ID and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if len(self.key_id) != KEY_ID_SIZE:
            raise KeyFormatError(f"key ID must be {KEY_ID_SIZE} bytes, got {len(self.key_id)}")
        if not self.signature:
            raise MalformedNoteError(f"signature by {self.name!r} is empty")

    @property
    def line(self) -> str:
        """``— <name> base64(key ID || signature)`` with its newline."""
        return f"{SIGNATURE_PREFIX}{self.name} {encode_base64(self.key_id + self.signature)}\n"

    @classmethod
    def parse(cls, line: str) -> NoteSignature:
        """Parse one signature line, without its newline."""
        if not line.startswith(SIGNATURE_PREFIX):
            raise MalformedNoteError(
                f"signature line {line[:40]!r} does not start with an em dash (U+2014) and a space"
            )
        name, space, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
        if not space:
            raise MalformedNoteError(f"signature line {line[:40]!r} has no space after the name")
        try:
            check_key_name(name)
            blob = decode_base64(encoded)
        except ValueError as error:
            raise MalformedNoteError(f"signature line {line[:40]!r}: {error}") from None
        if len(blob) <= KEY_ID_SIZE:
            raise MalformedNoteError(f"signature by {name!r} is too short: {len(blob)} bytes")
        return cls(name, blob[:KEY_ID_SIZE], blob[KEY_ID_SIZE:])


@dataclass(frozen=True)
class SignedNote:
    """A note text and its signatures. Parsing checks the format only: call :meth:`verify`.

    The spec says the text MUST be ignored until a trusted key's signature on it verifies.
    """

    text: str
    signatures: tuple[NoteSignature, ...]

    def __post_init__(self) -> None:
        check_note_text(self.text)
        if not self.signatures:
            raise MalformedNoteError("a signed note needs at least one signature")
        if len(self.signatures) > MAX_SIGNATURES:
            raise MalformedNoteError(
                f"note has {len(self.signatures)} signatures, more than {MAX_SIGNATURES}"
            )

    def __str__(self) -> str:
        return self.text + "\n" + "".join(signature.line for signature in self.signatures)

    def encode(self) -> bytes:
        """The note as UTF-8 bytes, ready to publish."""
        return str(self).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes | str) -> SignedNote:
        """Split a signed note into text and signatures, checking every format rule.

        Raises :class:`MalformedNoteError` for bytes that are not UTF-8, a control character
        other than newline (so CRLF line ends too), a missing final newline, no blank line, no
        signature line after the last blank line, or a bad signature line (hyphen or other dash
        instead of the em dash, missing space, bad key name, bad base64, too short), and for
        more than :data:`MAX_SIGNATURES` signature lines.
        """
        if isinstance(data, bytes):
            try:
                message = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise MalformedNoteError(f"note is not valid UTF-8: {error.reason}") from None
        else:
            message = data
        _check_characters(message)
        if not message.endswith("\n"):
            raise MalformedNoteError("note does not end in a newline")
        blank_line = message.rfind("\n\n")
        if blank_line < 0:
            raise MalformedNoteError("note has no blank line before its signatures")
        text, signature_block = message[: blank_line + 1], message[blank_line + 2 :]
        if not signature_block:
            raise MalformedNoteError("note has no signature lines after its last blank line")
        lines = signature_block.removesuffix("\n").split("\n")
        if len(lines) > MAX_SIGNATURES:
            raise MalformedNoteError(
                f"note has {len(lines)} signatures, more than {MAX_SIGNATURES}"
            )
        return cls(text, tuple(NoteSignature.parse(line) for line in lines))

    def verify(self, verifiers: Iterable[Verifier]) -> tuple[Verifier, ...]:
        """The known keys whose signatures verify; raises unless there is at least one.

        Signatures from unknown keys are ignored, even one that shares a name or an ID (not both)
        with a known key. Raises :class:`InvalidSignatureError` if any signature from a known key
        fails, and :class:`UnverifiedNoteError` if no known key signed the note.
        """
        known = {(verifier.name, verifier.key_id): verifier for verifier in verifiers}
        message = self.text.encode("utf-8")
        verified: list[Verifier] = []
        for signature in self.signatures:
            verifier = known.get((signature.name, signature.key_id))
            if verifier is None:
                continue
            if not verifier.verify(message, signature.signature):
                raise InvalidSignatureError(
                    f"signature by {signature.name} ({signature.key_id.hex()}) does not verify"
                )
            if verifier not in verified:
                verified.append(verifier)
        if not verified:
            signers = ", ".join(f"{s.name} ({s.key_id.hex()})" for s in self.signatures)
            raise UnverifiedNoteError(f"no signature from a known key; signed by: {signers}")
        return tuple(verified)


def sign_note(text: str, *signers: Signer) -> SignedNote:
    """Sign ``text`` with each signer, in order.

    >>> from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    >>> signer = Signer("example.com/log", Ed25519PrivateKey.generate())
    >>> note = sign_note("hello\\n", signer)
    >>> str(note).startswith("hello\\n\\n— example.com/log ")
    True
    >>> SignedNote.parse(note.encode()).verify([signer.verifier]) == (signer.verifier,)
    True
    """
    check_note_text(text)
    message = text.encode("utf-8")
    return SignedNote(
        text,
        tuple(NoteSignature(s.name, s.key_id, s.sign(message)) for s in signers),
    )
