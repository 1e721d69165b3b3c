"""Audit bundles: the log in one portable file, written from a store and read line by line.

A bundle is UTF-8 JSON lines, each ending in LF (``docs/audit.md`` states every rule):

1. a header: ``{"format": "gnau-dealer/audit-bundle/v1", "origin": ..., "public_keys": [vkey,
   ...], "first_index": F, "size": N, "left_frontier": [hex, ...]}``. The bundle holds entries
   ``F`` to ``N - 1``; ``left_frontier`` is the Merkle frontier of the entries before ``F`` (empty
   when ``F`` is 0), so the roots of the bundle's checkpoints can be recomputed from it alone;
2. every signed checkpoint with a size in ``F + 1 .. N``: ``{"checkpoint": "<note text>"}``, the
   last of size ``N``;
3. every entry in index order: ``{"entry": "<the entry's canonical JSON text>"}`` (its index is
   inside it).

:func:`write_bundle` writes one; :func:`read_header` reads its first line, refusing one that is not
a header of this format (:class:`BundleFormatError`), and :func:`read_line` each line after it,
a line that breaks a rule standing for the reason why. What the lines prove is
:mod:`gnau_service.audit.bundle_verification`'s to check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol, TextIO

from gnau_service.audit.checkpoint import ORIGIN_PREFIX, Checkpoint, CheckpointError, log_origin
from gnau_service.audit.entries import MAX_INDEX, clip, is_hash_hex
from gnau_service.audit.merkle import Frontier
from gnau_service.audit.note import SignedNote, Verifier
from gnau_service.common.quoting import quoted
from gnau_service.common.strict_json import (
    DuplicateMemberError,
    JsonTextError,
    MembersError,
    json_type,
    read_json,
    read_object,
)

BUNDLE_FORMAT: Final = "gnau-dealer/audit-bundle/v1"
HEADER_MEMBERS: Final = ("format", "origin", "public_keys", "first_index", "size", "left_frontier")

_BLANK: Final = re.compile(rb"[ \t]*")


class CannotVerifyError(ValueError):
    """Verification cannot start: exit status 2. Everything else is a
    :class:`~gnau_service.audit.bundle_report.Failure`."""


class BundleFormatError(CannotVerifyError):
    """The bundle's first line is not a header of this format (or the file is empty)."""


class ExportError(ValueError):
    """A bundle that cannot be written from the log as asked."""


class LogSource(Protocol):
    """What exporting needs from a store (``gnau_service.store.LogReader`` has it)."""

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]: ...
    def checkpoints(self) -> list[str]: ...
    def public_keys(self) -> list[str]: ...
    def frontier(self, size: int) -> Frontier: ...


def write_bundle(source: LogSource, out: TextIO, *, first_index: int = 0, end: int) -> int:
    """Write entries ``first_index`` to ``end - 1`` with their checkpoints; returns the count.

    ``end`` must be the size of a checkpoint, so that a signed root covers every entry written
    (the bundle is anchored). ``out`` should not translate newlines (``newline="\\n"``).
    """
    notes = [note for note in source.checkpoints() if first_index < _note_size(note) <= end]
    if not notes or _note_size(notes[-1]) != end:
        raise ExportError(
            f"the log has no checkpoint of size {end:,}: a bundle must end at a signed size"
        )
    header = {
        "format": BUNDLE_FORMAT,
        "origin": SignedNote.parse(notes[-1]).text.split("\n", 1)[0],
        "public_keys": source.public_keys(),
        "first_index": first_index,
        "size": end,
        "left_frontier": [node.hex() for node in source.frontier(first_index).hashes],
    }
    out.write(json.dumps(header) + "\n")
    for note in notes:
        out.write(json.dumps({"checkpoint": note}) + "\n")
    count = 0
    for data in source.iter_entries(first_index, end):
        out.write(json.dumps({"entry": data.decode("utf-8")}, ensure_ascii=False) + "\n")
        count += 1
    return count


# -- reading lines ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleHeader:
    """A bundle's first line, every field checked."""

    origin: str
    public_keys: tuple[Verifier, ...]
    first_index: int
    size: int
    left_frontier: Frontier


class LineKind(StrEnum):
    CHECKPOINT = "checkpoint"
    ENTRY = "entry"
    REFUSED = "refused"  # the line breaks a rule; its text is why


@dataclass(frozen=True)
class Line:
    """One line after the header: a checkpoint's or entry's text, or why it was refused."""

    number: int
    kind: LineKind
    text: str


def numbered_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """Each line with its number from 1, its LF removed. Blank lines at the end of the file are
    dropped (an editor's trailing newline); any other blank line is passed on, to be refused."""
    blank: list[tuple[int, bytes]] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.removesuffix(b"\n")
        if _BLANK.fullmatch(line):
            blank.append((number, line))
            continue
        yield from blank
        blank.clear()
        yield number, line


def _parse_json_line(number: int, line: bytes) -> dict[str, object]:
    """The JSON object a line holds; raises :class:`_LineError` saying why it holds none."""
    if _BLANK.fullmatch(line):
        raise _LineError(number, "is blank (blank lines are allowed only at the end of the file)")
    if b"\r" in line:
        raise _LineError(
            number, "holds a carriage return: lines end in LF alone (CRLF and CR are refused)"
        )
    try:
        value = read_json(line)
    except DuplicateMemberError as error:
        raise _LineError(number, f"has the member {quoted(error.member)} twice") from None
    except JsonTextError as error:
        raise _LineError(number, f"is {clip(str(error), 120)}") from None
    if not isinstance(value, dict):
        raise _LineError(number, f"is {json_type(value)}, not a JSON object")
    return value


def read_header(numbered_line: tuple[int, bytes] | None) -> BundleHeader:
    if numbered_line is None:
        raise BundleFormatError("the bundle is empty")
    number, line = numbered_line
    try:
        obj = _parse_json_line(number, line)
    except _LineError as error:
        raise BundleFormatError(f"{error} (it must be the {BUNDLE_FORMAT} header)") from None
    if obj.get("format") != BUNDLE_FORMAT:
        raise BundleFormatError(
            f"line 1 is not a {BUNDLE_FORMAT} header: format is {quoted(obj.get('format'))}"
        )
    try:
        read_object(obj, HEADER_MEMBERS)
    except MembersError as error:
        raise BundleFormatError(
            f"header members must be exactly {', '.join(HEADER_MEMBERS)}; missing "
            f"{error.missing}, unknown {quoted(sorted(error.unknown), 120)}"
        ) from None
    origin = obj["origin"]
    if not (
        isinstance(origin, str)
        and origin.startswith(ORIGIN_PREFIX)
        and _is_origin(origin.removeprefix(ORIGIN_PREFIX))
    ):
        raise BundleFormatError(
            f"header origin {quoted(origin)} is not gnau-dealer/<deployment name>"
        )
    first_index = _header_integer(obj, "first_index", 0, MAX_INDEX)
    size = _header_integer(obj, "size", first_index + 1, MAX_INDEX + 1)
    keys, frontier = obj["public_keys"], obj["left_frontier"]
    if not isinstance(keys, list) or not keys:
        raise BundleFormatError(f"header public_keys must be a non-empty list, not {quoted(keys)}")
    if not isinstance(frontier, list) or not all(is_hash_hex(node) for node in frontier):
        raise BundleFormatError(
            f"header left_frontier must be a list of 64-hex-digit hashes, not {quoted(frontier)}"
        )
    if len(frontier) != first_index.bit_count():
        raise BundleFormatError(
            f"header left_frontier has {len(frontier)} hashes, but a frontier of "
            f"{first_index:,} entries has {first_index.bit_count()}"
        )
    return BundleHeader(
        origin=origin,
        public_keys=tuple(_verifier(vkey) for vkey in keys),
        first_index=first_index,
        size=size,
        left_frontier=Frontier(first_index, tuple(bytes.fromhex(node) for node in frontier)),
    )


def _header_integer(obj: dict[str, object], name: str, low: int, high: int) -> int:
    value = obj[name]
    if type(value) is not int or not low <= value <= high:
        raise BundleFormatError(
            f"header {name} must be an integer in {low:,}..{high:,}, not {quoted(value)}"
        )
    return value


def _is_origin(deployment_name: str) -> bool:
    try:
        log_origin(deployment_name)
    except CheckpointError:
        return False
    return True


def _verifier(vkey: object) -> Verifier:
    if not isinstance(vkey, str):
        raise BundleFormatError(f"header public_keys: {quoted(vkey)} is not a vkey string")
    try:
        return Verifier.from_vkey(vkey)
    # KeyFormatError, or the UnicodeEncodeError of a key name holding a lone surrogate.
    except ValueError as error:
        raise BundleFormatError(f"header public_keys: {clip(str(error), 200)}") from None


def read_line(number: int, line: bytes) -> Line:
    """A line after the header: exactly ``{"checkpoint": text}`` or ``{"entry": text}``."""
    try:
        obj = _parse_json_line(number, line)
    except _LineError as error:
        return Line(number, LineKind.REFUSED, str(error))
    kinds = [kind for kind in (LineKind.CHECKPOINT, LineKind.ENTRY) if kind.value in obj]
    if len(obj) != 1 or len(kinds) != 1:
        return Line(
            number,
            LineKind.REFUSED,
            f'line {number} must be {{"checkpoint": text}} or {{"entry": text}}, but its members '
            f"are {quoted(sorted(obj), 120)}",
        )
    value = obj[kinds[0].value]
    if not isinstance(value, str):
        return Line(
            number,
            LineKind.REFUSED,
            f"line {number}: {kinds[0].value} must be a string, not {json_type(value)}",
        )
    return Line(number, kinds[0], value)


EntryItem = bytes | str  # an entry's bytes, or why its line holds none


def entry_items(lines: Iterable[Line]) -> Iterator[EntryItem]:
    """The entry lines' bytes, in order; any other line is the reason it stands there wrongly."""
    for line in lines:
        if line.kind is LineKind.REFUSED:
            yield line.text
        elif line.kind is LineKind.CHECKPOINT:
            yield f"line {line.number}: a checkpoint after the first entry (checkpoints come first)"
        else:
            try:
                yield line.text.encode("utf-8")
            except UnicodeEncodeError:
                yield f"line {line.number}: the entry holds a lone surrogate, which is not text"


class _LineError(ValueError):
    def __init__(self, number: int, problem: str) -> None:
        super().__init__(f"line {number} {problem}")


def _note_size(note: str) -> int:
    """The size of a checkpoint of the log's own (export reads its store's notes)."""
    return Checkpoint.parse(SignedNote.parse(note).text).size
