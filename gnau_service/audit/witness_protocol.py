"""The C2SP tlog-witness ``add-checkpoint`` request and response bodies, and their limits.

A request body (https://c2sp.org/tlog-witness) is, each line ending in a newline:

    old <size of the previous checkpoint, decimal, no leading zeros>
    <zero to 63 consistency proof lines, one base64 hash each>
    <an empty line>
    <the signed checkpoint note>

A 200 response is one or more cosignature lines; a 409 response is the witness's latest size and
a newline, with ``Content-Type: text/x.tlog.size``.

>>> request = parse_add_checkpoint(b"old 0\\n\\nexample.com/log\\n1\\n" + b"A" * 43 + b"=\\n\\n"
...     b"\\xe2\\x80\\x94 example.com/log AAAAAA==\\n")
>>> request.old_size, request.proof, request.note.startswith("example.com/log\\n1\\n")
(0, (), True)
>>> encode_add_checkpoint(0, [], request.note) == b"old 0\\n\\n" + request.note.encode()
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.audit.checkpoint import MAX_TREE_SIZE
from gnau_service.audit.merkle import HASH_SIZE
from gnau_service.audit.note import MAX_SIGNATURES, decode_base64, encode_base64

ADD_CHECKPOINT_PATH: Final = "/add-checkpoint"
#: The spec's bound: a client MUST NOT send more (a proof between trees of up to 2**64 leaves).
MAX_PROOF_LINES: Final = 63
#: The largest note read: a checkpoint of a few lines and :data:`MAX_SIGNATURES` signature lines
#: of a few hundred bytes each fit with room to spare; a larger body is refused (413) unread.
MAX_NOTE_BYTES: Final = 64 * 1024
#: ``old <20 digits>\n`` plus 63 proof lines of 45 bytes, then the note.
MAX_REQUEST_BYTES: Final = 32 + MAX_PROOF_LINES * 45 + MAX_NOTE_BYTES
SIZE_CONTENT_TYPE: Final = "text/x.tlog.size"
COSIGNATURE_CONTENT_TYPE: Final = "text/plain; charset=utf-8"

_DECIMAL: Final = re.compile(r"0|[1-9][0-9]{0,19}", re.ASCII)

assert MAX_SIGNATURES * 200 < MAX_NOTE_BYTES  # a note with the most signatures read still fits


class MalformedRequestError(ValueError):
    """A request body that breaks the add-checkpoint format (the witness answers 400)."""


@dataclass(frozen=True)
class AddCheckpointRequest:
    """A parsed request: the old size, the proof hashes and the checkpoint note, still unread."""

    old_size: int
    proof: tuple[bytes, ...]
    note: str


def parse_add_checkpoint(body: bytes) -> AddCheckpointRequest:
    """Split an add-checkpoint body, checking the old-size line and each proof line.

    The note after the empty line is returned as text; whether it is a well-formed signed
    checkpoint is for :func:`~gnau_service.audit.checkpoint.open_checkpoint` to say.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedRequestError("request body is not UTF-8") from None
    head, blank, note = text.partition("\n\n")
    if not blank:
        raise MalformedRequestError("request body has no empty line before the checkpoint")
    lines = head.split("\n")
    old_line, proof_lines = lines[0], lines[1:]
    if not old_line.startswith("old "):
        raise MalformedRequestError("request body does not start with an 'old <size>' line")
    size_text = old_line.removeprefix("old ")
    if not _DECIMAL.fullmatch(size_text) or int(size_text) > MAX_TREE_SIZE:
        raise MalformedRequestError(
            f"old size {size_text[:24]!r} is not a decimal in 0..2**64-1 without leading zeros"
        )
    if len(proof_lines) > MAX_PROOF_LINES:
        raise MalformedRequestError(
            f"request has {len(proof_lines)} proof lines, more than {MAX_PROOF_LINES}"
        )
    proof = []
    for number, line in enumerate(proof_lines, start=1):
        try:
            node = decode_base64(line)
        except ValueError:
            raise MalformedRequestError(f"proof line {number} is not canonical base64") from None
        if len(node) != HASH_SIZE:
            raise MalformedRequestError(
                f"proof line {number} is {len(node)} bytes, not a {HASH_SIZE}-byte hash"
            )
        proof.append(node)
    if len(note.encode("utf-8")) > MAX_NOTE_BYTES:
        raise MalformedRequestError(f"checkpoint note is larger than {MAX_NOTE_BYTES} bytes")
    return AddCheckpointRequest(int(size_text), tuple(proof), note)


def encode_add_checkpoint(old_size: int, proof: Sequence[bytes], note: str | bytes) -> bytes:
    """The body a log sends to ask for a cosignature: what :func:`parse_add_checkpoint` reads."""
    if len(proof) > MAX_PROOF_LINES:
        raise ValueError(f"a proof of {len(proof)} hashes is longer than {MAX_PROOF_LINES}")
    note_bytes = note.encode("utf-8") if isinstance(note, str) else note
    lines = [f"old {old_size:d}", *(encode_base64(node) for node in proof)]
    return ("\n".join(lines) + "\n\n").encode("ascii") + note_bytes


def parse_size_response(body: bytes) -> int:
    """The witness's latest size from a 409 ``text/x.tlog.size`` body: decimal and a newline."""
    text = body.decode("ascii", errors="replace")
    if not text.endswith("\n") or not _DECIMAL.fullmatch(text[:-1]):
        raise ValueError(f"{text[:40]!r} is not a tree size and a newline")
    return int(text[:-1])
