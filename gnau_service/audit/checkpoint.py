"""C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint): a log's signed tree head.

The checkpoint is the text of a signed note: the origin line, the tree size in decimal, the
base64 root hash, then optional non-empty extension lines, each line ending in a newline. Gnau
Dealer logs use the origin ``gnau-dealer/<deployment-name>`` and sign with a key of that name.

>>> checkpoint = Checkpoint("gnau-dealer/test", 0, EMPTY_ROOT)
>>> print(checkpoint.to_note_text(), end="")
gnau-dealer/test
0
47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
>>> Checkpoint.parse(checkpoint.to_note_text()) == checkpoint
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.audit.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    RootMismatchError,
    verify_consistency,
)
from gnau_service.audit.note import (
    MalformedNoteError,
    SignedNote,
    Signer,
    Verifier,
    check_note_text,
    decode_base64,
    encode_base64,
    sign_note,
)

ORIGIN_PREFIX: Final = "gnau-dealer/"
MAX_TREE_SIZE: Final = 2**64 - 1  # what other checkpoint implementations (uint64) can read

_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_DEPLOYMENT_NAME: Final = re.compile(r"[a-z0-9]([a-z0-9.-]{0,62}[a-z0-9])?", re.ASCII)


class CheckpointError(ValueError):
    """A checkpoint body that breaks the tlog-checkpoint format, or is for the wrong log."""


def log_origin(deployment_name: str) -> str:
    """The origin (and key name) of a deployment's log: ``gnau-dealer/<deployment-name>``.

    Deployment names are lower-case letters, digits, dots and hyphens, so the origin is a valid
    note key name and reads as a schema-less URL path, as the spec recommends.

    >>> log_origin("eu-prod-1")
    'gnau-dealer/eu-prod-1'
    """
    if not _DEPLOYMENT_NAME.fullmatch(deployment_name):
        raise CheckpointError(
            f"deployment name {deployment_name!r} must be 1-64 of a-z, 0-9, '.' and '-', "
            "starting and ending with a letter or digit"
        )
    return ORIGIN_PREFIX + deployment_name


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: ``origin``, ``size`` leaves, RFC 6962 ``root_hash``, opaque ``extensions``."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for what, line in (
            ("origin", self.origin),
            *(("extension line", e) for e in self.extensions),
        ):
            if not line or "\n" in line:
                raise CheckpointError(f"{what} {line!r} must be one non-empty line")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"tree size {self.size} is not in 0..2**64-1")
        if len(self.root_hash) != HASH_SIZE:
            raise CheckpointError(f"root hash must be {HASH_SIZE} bytes, got {len(self.root_hash)}")
        try:
            check_note_text(self.to_note_text())
        except MalformedNoteError as error:
            raise CheckpointError(f"checkpoint cannot be a note text: {error}") from None

    def to_note_text(self) -> str:
        """The note text: one line each for origin, size, root and every extension."""
        root = encode_base64(self.root_hash)
        return "".join(
            f"{line}\n" for line in (self.origin, str(self.size), root, *self.extensions)
        )

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Parse a note text into a checkpoint; the inverse of :meth:`to_note_text`.

        Raises :class:`CheckpointError` for a missing final newline, fewer than three lines, an
        empty line, a size that is not plain decimal (signs, leading zeros, non-ASCII digits), a
        size above 2**64-1, or a root hash that is not canonical base64 of 32 bytes.
        """
        if not text.endswith("\n"):
            raise CheckpointError("checkpoint text must end in a newline")
        lines = text.removesuffix("\n").split("\n")
        if len(lines) < 3:
            raise CheckpointError(f"checkpoint needs origin, size and root lines; got {len(lines)}")
        if "" in lines:
            raise CheckpointError(f"checkpoint line {lines.index('') + 1} is empty")
        origin, size_text, root_text, *extensions = lines
        if not _DECIMAL.fullmatch(size_text):
            raise CheckpointError(f"tree size {size_text!r} is not a decimal without leading zeros")
        try:
            root_hash = decode_base64(root_text)
        except ValueError as error:
            raise CheckpointError(f"root hash: {error}") from None
        return cls(origin, int(size_text), root_hash, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, *signers: Signer) -> SignedNote:
    """The checkpoint as a note signed by each signer (the log's key name should be the origin)."""
    return sign_note(checkpoint.to_note_text(), *signers)


@dataclass(frozen=True)
class SignedCheckpoint:
    """A checkpoint whose note a trusted key has signed, with that note and those keys."""

    checkpoint: Checkpoint
    note: SignedNote
    signed_by: tuple[Verifier, ...]


def open_checkpoint(
    data: bytes | str, origin: str, verifiers: Iterable[Verifier]
) -> SignedCheckpoint:
    """Parse and verify a signed checkpoint of the log ``origin``.

    Raises the :class:`~gnau_service.audit.note.NoteError` subclasses of
    :meth:`SignedNote.parse` and :meth:`SignedNote.verify` (so an edited size, root or origin, a
    checkpoint signed only by unknown keys, a hyphen for the em dash or CRLF line ends are all
    refused), then :class:`CheckpointError` for a malformed body or another log's origin.
    """
    note = SignedNote.parse(data)
    signed_by = note.verify(verifiers)
    checkpoint = Checkpoint.parse(note.text)
    if checkpoint.origin != origin:
        raise CheckpointError(
            f"checkpoint is for origin {checkpoint.origin!r}, expected {origin!r}"
        )
    return SignedCheckpoint(checkpoint, note, signed_by)


@dataclass(frozen=True)
class ForkEvidence:
    """Two signed checkpoints of one log that cannot both be true.

    ``older`` has the smaller (or equal) size. With equal sizes the two signed notes alone prove
    the fork. With different sizes the evidence is the notes plus the consistency ``proof`` that
    fails to connect them; since proofs are not signed, it is as strong as the proof's source
    (the log itself, when it answered a consistency request with it).
    """

    older: SignedCheckpoint
    newer: SignedCheckpoint
    proof: tuple[bytes, ...]
    reason: str


def find_fork(
    first: SignedCheckpoint, second: SignedCheckpoint, proof: Sequence[bytes] = ()
) -> ForkEvidence | None:
    """Evidence that two verified checkpoints of the same log fork, or ``None`` if consistent.

    ``proof`` is the consistency proof from the smaller size to the larger (unused when the
    sizes are equal). A proof that is malformed (wrong length, wrong hash size) proves nothing
    either way and raises its :class:`~gnau_service.audit.merkle.ProofError`; only a well-formed
    proof that fails to connect the two roots is evidence.
    """
    if first.checkpoint.origin != second.checkpoint.origin:
        raise CheckpointError(
            f"checkpoints of different logs: {first.checkpoint.origin!r} and "
            f"{second.checkpoint.origin!r}"
        )
    older, newer = sorted((first, second), key=lambda signed: signed.checkpoint.size)
    old, new = older.checkpoint, newer.checkpoint
    if old.size == new.size:
        if old.root_hash == new.root_hash:
            return None
        return ForkEvidence(older, newer, (), f"two different roots for size {old.size}")
    if old.size == 0:
        # Every tree extends the empty one, provided the log's empty root is the empty-tree hash.
        if old.root_hash == EMPTY_ROOT:
            return None
        return ForkEvidence(
            older, newer, (), "a checkpoint of size 0 whose root is not SHA-256('')"
        )
    try:
        verify_consistency(old.size, new.size, proof, old.root_hash, new.root_hash)
    except RootMismatchError as error:
        return ForkEvidence(older, newer, tuple(proof), f"inconsistent checkpoints: {error}")
    return None
