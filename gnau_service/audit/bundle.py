"""Audit bundles: the log in one portable file, and the offline verification auditors run.

A bundle is UTF-8 JSON lines, each ending in LF (``docs/audit.md`` states every rule):

1. a header: ``{"format": "gnau-dealer/audit-bundle/v1", "origin": ..., "public_keys": [vkey,
   ...], "first_index": F, "size": N, "left_frontier": [hex, ...]}``. The bundle holds entries
   ``F`` to ``N - 1``; ``left_frontier`` is the Merkle frontier of the entries before ``F`` (empty
   when ``F`` is 0), so the roots of the bundle's checkpoints can be recomputed from it alone;
2. every signed checkpoint with a size in ``F + 1 .. N``: ``{"checkpoint": "<note text>"}``, the
   last of size ``N``;
3. every entry in index order: ``{"entry": "<the entry's canonical JSON text>"}`` (its index is
   inside it).

:func:`verify_bundle` checks, and reports the first failure of: each line's form, each entry's
canonical bytes and signature (by the key current at that point: a pinned key, then the keys it
rotated to), the index sequence and hash chain, every checkpoint's signature and root,
consistency with a pinned earlier checkpoint (truncation, rollback and forks), every round
replayed with the fairness verifier and the rules core (:mod:`gnau_service.audit.replay`), and
last whether a signed root covers every entry (the bundle is *anchored*).

It raises only :class:`CannotVerifyError`, when verification cannot start (the header, or an
argument, is unusable); everything after the header is content, and a problem there is a
:class:`Failure` in the report.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from multiprocessing.pool import AsyncResult
from typing import Any, Final, Protocol, TextIO

from gnau_service.audit.checkpoint import (
    ORIGIN_PREFIX,
    Checkpoint,
    CheckpointError,
    ForkEvidence,
    SignedCheckpoint,
    find_fork,
    log_origin,
    open_checkpoint,
)
from gnau_service.audit.cosignature import WitnessKey, cosigners
from gnau_service.audit.entries import (
    GENESIS_PREV_HASH,
    MAX_INDEX,
    EntryError,
    EntryKind,
    LogEntry,
    clip,
    decode_entry,
    is_hash_hex,
)
from gnau_service.audit.merkle import Frontier, leaf_hash
from gnau_service.audit.note import NoteError, SignedNote, Verifier
from gnau_service.audit.replay import ReplayError, RoundCheck, RoundReplay, run_check
from gnau_service.audit.signing import RotationError, trusted_keys
from gnau_service.audit.spans import entry_span
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
CHUNK: Final = 2_000
CHECK_BATCH: Final = 500
PARALLEL_FROM: Final = 20_000
MAX_REASON: Final = 400  # characters of a failure's reason; lower layers may quote at length

_BLANK: Final = re.compile(rb"[ \t]*")


class CannotVerifyError(ValueError):
    """Verification cannot start: exit status 2. Everything else is a :class:`Failure`."""


class BundleFormatError(CannotVerifyError):
    """The bundle's first line is not a header of this format (or the file is empty)."""


class PinnedCheckpointError(CannotVerifyError):
    """The pinned checkpoint is not a well-formed signed checkpoint of the bundle's log."""


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


@dataclass(frozen=True)
class Failure:
    """The first thing that does not verify: the entry index (if it is an entry's) and why."""

    reason: str
    index: int | None = None

    def __post_init__(self) -> None:
        # The one bound on every reason, whatever layer wrote it and however much it quotes.
        object.__setattr__(self, "reason", clip(self.reason, MAX_REASON))

    def __str__(self) -> str:
        return self.reason if self.index is None else f"entry {self.index}: {self.reason}"


class Verdict(StrEnum):
    """What a bundle is. Only ``VALID`` is exit status 0."""

    VALID = "VALID"
    UNANCHORED = "UNANCHORED"  # every check passed, but no signed root covers the last entries
    INVALID = "INVALID"


@dataclass
class BundleReport:
    """What :func:`verify_bundle` found."""

    first_index: int = 0
    size: int = 0
    entries: int = 0
    checkpoints: int = 0
    rounds_settled: int = 0
    rounds_voided: int = 0
    rounds_open: int = 0
    rounds_partial: int = 0
    anchored_size: int | None = None  # the largest verified signed size, if any covers entries
    allow_unanchored: bool = False
    failure: Failure | None = None
    fork: ForkEvidence | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def unanchored(self) -> str | None:
        """Which entries no verified signed root covers, if any do not."""
        if self.anchored_size == self.size:
            return None
        if self.anchored_size is None:
            covered = "no checkpoint was verified"
            first = self.first_index
        else:
            covered = f"the largest verified checkpoint is of size {self.anchored_size:,}"
            first = self.anchored_size
        return (
            f"no signed root covers {entry_span(first, self.size)} ({covered}, the bundle's "
            f"size is {self.size:,})"
        )

    @property
    def verdict(self) -> Verdict:
        if self.failure is not None:
            return Verdict.INVALID
        if self.unanchored is not None and not self.allow_unanchored:
            return Verdict.UNANCHORED
        return Verdict.VALID

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.VALID

    def summary(self) -> str:
        verified = entry_span(self.first_index, self.first_index + self.entries)
        lines = [
            f"entries: {self.entries:,} verified ({verified})",
            f"checkpoints: {self.checkpoints:,} verified",
            f"rounds: {self.rounds_settled:,} settled and replayed, {self.rounds_voided:,} voided,"
            f" {self.rounds_open:,} still open"
            + (
                f", {self.rounds_partial:,} only partly in this bundle"
                if self.rounds_partial
                else ""
            ),
        ]
        unanchored = self.unanchored if self.failure is None else None
        if unanchored is not None:
            lines.append(f"unanchored: {unanchored}")
        lines += [f"warning: {warning}" for warning in self.warnings]
        if self.fork is not None:
            lines.append(f"FORK: {self.fork.reason}")
            lines.append(f"  checkpoint 1:\n{_indent(str(self.fork.older.note))}")
            lines.append(f"  checkpoint 2:\n{_indent(str(self.fork.newer.note))}")
        verdict = self.verdict
        if verdict is Verdict.INVALID:
            lines.append(f"result: INVALID: {self.failure}")
        elif verdict is Verdict.UNANCHORED:
            lines.append(
                "result: UNANCHORED: the entries verify, but nothing ties the last of them to a "
                "signed tree (--allow-unanchored accepts this)"
            )
        else:
            lines.append("result: VALID")
        return "\n".join(lines)


Progress = Callable[[int, int], None]


def verify_bundle(
    lines: Iterable[bytes],
    *,
    pinned_keys: Sequence[Verifier] = (),
    pinned_checkpoint: bytes | str | None = None,
    allow_unanchored: bool = False,
    progress: Progress | None = None,
    jobs: int | None = None,
    witnesses: Sequence[WitnessKey] = (),
    quorum: int = 0,
) -> BundleReport:
    """Verify a bundle read line by line as bytes, as a binary file iterates them (split at LF
    only). Raises :class:`BundleFormatError` if the first line is not a header of this format
    and :class:`PinnedCheckpointError` if ``pinned_checkpoint`` is unusable; otherwise reports
    the first failure (or none) in a :class:`BundleReport`. ``allow_unanchored`` turns an
    unanchored verdict into a valid one with a warning. With ``quorum`` > 0 only a checkpoint
    that at least ``quorum`` of the ``witnesses`` validly cosigned anchors the entries it covers
    (the others are still checked: signature, root, forks)."""
    numbered = _numbered_lines(lines)
    header = _read_header(next(numbered, None))
    pinned_size = None if pinned_checkpoint is None else _pinned_size(pinned_checkpoint, header)
    verification = _Verification(header, pinned_keys, progress, jobs)
    verification.witnessed = (tuple(witnesses), quorum)
    verification.report.allow_unanchored = allow_unanchored
    body = (_read_line(number, line) for number, line in numbered)
    notes: list[tuple[int, str]] = []
    first_entry: list[_Line] = []
    for line in body:
        if line.kind is not _LineKind.CHECKPOINT:
            first_entry.append(line)
            break
        notes.append((line.number, line.text))
    sizes = verification.checkpoint_sizes(notes)
    if sizes is None:
        return verification.report
    verification.want_roots_at(sizes)
    if pinned_size is not None:
        verification.want_roots_at([pinned_size])
    verification.check_entries(_entry_items(itertools.chain(first_entry, body)))
    verification.check_checkpoints(notes)
    if pinned_checkpoint is not None:
        verification.check_pinned(pinned_checkpoint)
    report = verification.report
    if report.failure is None and report.unanchored is not None and allow_unanchored:
        report.warnings.append(
            "accepted although unanchored (--allow-unanchored): the entries no signed root "
            "covers could be rewritten without a trace"
        )
    return report


# -- reading lines ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleHeader:
    """A bundle's first line, every field checked."""

    origin: str
    public_keys: tuple[Verifier, ...]
    first_index: int
    size: int
    left_frontier: Frontier


class _LineKind(StrEnum):
    CHECKPOINT = "checkpoint"
    ENTRY = "entry"
    REFUSED = "refused"  # the line breaks a rule; its text is why


@dataclass(frozen=True)
class _Line:
    """One line after the header: a checkpoint's or entry's text, or why it was refused."""

    number: int
    kind: _LineKind
    text: str


def _numbered_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
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


def _read_header(numbered_line: tuple[int, bytes] | None) -> BundleHeader:
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


def _pinned_size(data: bytes | str, header: BundleHeader) -> int:
    """The size of a pinned checkpoint, checked to be a well-formed signed checkpoint of the
    bundle's log. Its signature is checked later: it may be by a key the bundle rotates to."""
    try:
        checkpoint = Checkpoint.parse(SignedNote.parse(data).text)
    except (NoteError, CheckpointError) as error:
        raise PinnedCheckpointError(f"pinned checkpoint: {clip(str(error), 200)}") from None
    if checkpoint.origin != header.origin:
        raise PinnedCheckpointError(
            f"pinned checkpoint is of the log {quoted(checkpoint.origin)}, the bundle's is "
            f"{header.origin!r}"
        )
    return checkpoint.size


def _read_line(number: int, line: bytes) -> _Line:
    """A line after the header: exactly ``{"checkpoint": text}`` or ``{"entry": text}``."""
    try:
        obj = _parse_json_line(number, line)
    except _LineError as error:
        return _Line(number, _LineKind.REFUSED, str(error))
    kinds = [kind for kind in (_LineKind.CHECKPOINT, _LineKind.ENTRY) if kind.value in obj]
    if len(obj) != 1 or len(kinds) != 1:
        return _Line(
            number,
            _LineKind.REFUSED,
            f'line {number} must be {{"checkpoint": text}} or {{"entry": text}}, but its members '
            f"are {quoted(sorted(obj), 120)}",
        )
    value = obj[kinds[0].value]
    if not isinstance(value, str):
        return _Line(
            number,
            _LineKind.REFUSED,
            f"line {number}: {kinds[0].value} must be a string, not {json_type(value)}",
        )
    return _Line(number, kinds[0], value)


EntryItem = bytes | str  # an entry's bytes, or why its line holds none


def _entry_items(lines: Iterable[_Line]) -> Iterator[EntryItem]:
    """The entry lines' bytes, in order; any other line is the reason it stands there wrongly."""
    for line in lines:
        if line.kind is _LineKind.REFUSED:
            yield line.text
        elif line.kind is _LineKind.CHECKPOINT:
            yield f"line {line.number}: a checkpoint after the first entry (checkpoints come first)"
        else:
            try:
                yield line.text.encode("utf-8")
            except UnicodeEncodeError:
                yield f"line {line.number}: the entry holds a lone surrogate, which is not text"


class _LineError(ValueError):
    def __init__(self, number: int, problem: str) -> None:
        super().__init__(f"line {number} {problem}")


class _KeyChain:
    """The log keys trusted so far: the pinned key, then each key a valid rotation names."""

    def __init__(self, pinned: Verifier) -> None:
        self.pinned = pinned
        self.rotations: list[str] = []
        self.chain = [pinned]

    @property
    def current(self) -> Verifier:
        return self.chain[-1]

    def rotate(self, note: str) -> None:
        chain = trusted_keys(self.pinned, [*self.rotations, note])
        self.rotations.append(note)
        self.chain = [key.verifier for key in chain]


class _Verification:
    """The state of one bundle's verification; each check records the first failure."""

    def __init__(
        self,
        header: BundleHeader,
        pinned_keys: Sequence[Verifier],
        progress: Progress | None,
        jobs: int | None,
    ) -> None:
        self.origin = header.origin
        self.first_index = header.first_index
        self.size = header.size
        self.report = BundleReport(first_index=self.first_index, size=self.size)
        self.progress = progress
        self.jobs = jobs
        if pinned_keys:
            self.keys = _KeyChain(pinned_keys[0])
        else:
            self.report.warnings.append(
                "no key was pinned (--key): the bundle's own first key is trusted, which proves "
                "integrity but not authorship"
            )
            self.keys = _KeyChain(header.public_keys[0])
        self.candidates = _unique([*pinned_keys, *header.public_keys])
        self.frontier = header.left_frontier
        self.roots: dict[int, bytes] = {}
        self.wanted_sizes: set[int] = set()
        self.replay = RoundReplay()
        self.partial_rounds: set[str] = set()
        #: The trusted witnesses and how many must cosign a checkpoint for it to anchor.
        self.witnessed: tuple[tuple[WitnessKey, ...], int] = ((), 0)

    def want_roots_at(self, sizes: Iterable[int]) -> None:
        self.wanted_sizes.update(sizes)
        if self.first_index in self.wanted_sizes:
            self.roots[self.first_index] = self.frontier.root()

    def fail(self, reason: str, index: int | None = None) -> None:
        if self.report.failure is None:
            self.report.failure = Failure(reason, index)

    def anchor(self, size: int) -> None:
        """A verified signed root covers the first ``size`` entries."""
        if self.report.anchored_size is None or size > self.report.anchored_size:
            self.report.anchored_size = size

    def checkpoint_sizes(self, notes: list[tuple[int, str]]) -> list[int] | None:
        """The size of each checkpoint line, its signature unchecked yet (the keys that signed
        it may come from rotations in the entries); None, after failing, if a line is not a
        checkpoint of this bundle."""
        sizes = []
        for number, text in notes:
            try:
                checkpoint = Checkpoint.parse(SignedNote.parse(text).text)
            except (NoteError, CheckpointError) as error:
                self.fail(f"line {number}: checkpoint refused: {error}")
                return None
            if checkpoint.size <= self.first_index:
                self.fail(
                    f"line {number}: a checkpoint of size {checkpoint.size:,} covers no entry of "
                    f"this bundle, which starts at {self.first_index:,}"
                )
                return None
            sizes.append(checkpoint.size)
        return sizes

    def check_entries(self, items: Iterable[EntryItem]) -> None:
        count = self.size - self.first_index
        vkeys = [key.vkey for key in self.candidates]
        with _Workers(vkeys, count, self.jobs) as workers:
            self._check_entries(items, workers, count)
            # A check still running may concern an earlier entry than a failure found since.
            pending = workers.drain()
            found = self.report.failure
            if pending is not None and (found is None or _before(pending, found)):
                self.report.failure = pending
        report = self.report
        report.rounds_settled = self.replay.settled
        report.rounds_voided = self.replay.voided
        report.rounds_open = len(self.replay.open_rounds)
        report.rounds_partial = len(self.partial_rounds)
        if report.entries != count:
            self.fail(
                f"the header announces {entry_span(self.first_index, self.size)}, but the bundle "
                f"holds {entry_span(self.first_index, self.first_index + report.entries)} "
                "(truncated or padded)"
            )

    def _check_entries(self, items: Iterable[EntryItem], workers: _Workers, count: int) -> None:
        report = self.report
        expected_prev = GENESIS_PREV_HASH if self.first_index == 0 else None
        if self.first_index:
            report.warnings.append(
                f"the bundle starts at entry {self.first_index:,}: entries before it, and rounds "
                "begun before it, are not checked"
            )
        index = self.first_index
        for data, decoded in workers.decoded(items):
            failure = self._entry_failure(decoded, index, expected_prev)
            if failure is not None:
                self.fail(failure, index)
                return
            assert isinstance(decoded, LogEntry) and isinstance(data, bytes)
            leaf = leaf_hash(data)
            expected_prev = leaf.hex()
            self.frontier, _ = self.frontier.append(leaf)
            if self.frontier.size in self.wanted_sizes:
                self.roots[self.frontier.size] = self.frontier.root()
            failure = self._follow(decoded, index, workers)
            if failure is not None:
                self.fail(failure, index)
                return
            if report.failure is not None:  # a round check, for an earlier entry, failed
                return
            index += 1
            report.entries += 1
            if self.progress is not None:
                self.progress(report.entries, count)

    def _entry_failure(
        self, decoded: LogEntry | str, index: int, expected_prev: str | None
    ) -> str | None:
        if isinstance(decoded, str):
            return decoded
        if decoded.index != index:
            return (
                f"the entry says index {decoded.index:,} but stands where {index:,} belongs "
                "(an entry was removed, inserted or reordered)"
            )
        if decoded.key_id != self.keys.current.key_id.hex():
            return (
                f"signed by key {decoded.key_id}, but the trusted key at this point is "
                f"{self.keys.current.vkey}"
            )
        if expected_prev is not None and decoded.prev_hash != expected_prev:
            return (
                f"prev_hash {decoded.prev_hash} is not the previous entry's hash {expected_prev}"
                " (an entry was removed, inserted or reordered)"
            )
        return None

    def _follow(self, entry: LogEntry, index: int, workers: _Workers) -> str | None:
        """Apply one verified entry's meaning: a key rotation, or a round event to replay (its
        order here, its costly checks by the workers)."""
        if entry.kind is EntryKind.KEY_ROTATED:
            note = entry.payload.get("rotation")
            if not isinstance(note, str):
                return "KEY_ROTATED must carry the signed rotation note in payload.rotation"
            try:
                self.keys.rotate(note)
            except (NoteError, RotationError) as error:
                return f"key rotation refused: {error}"
            return None
        if entry.kind is EntryKind.PLAYER_FORGOTTEN and entry.payload:
            # The event names no one: a member here could only be a player or a reference.
            return "PLAYER_FORGOTTEN must have an empty payload (it names no player)"
        round_id = entry.round_id
        if not entry.kind.is_round_event or round_id is None or round_id in self.partial_rounds:
            return None
        if (
            self.first_index
            and entry.kind is not EntryKind.ROUND_COMMITTED
            and not self.replay.knows(round_id)
        ):
            self.partial_rounds.add(round_id)
            return None
        try:
            check = self.replay.stage(entry.kind, round_id, entry.payload)
        except ReplayError as error:
            return str(error)
        if check is not None:
            failed = workers.check(index, check)
            if failed is not None:
                self.report.failure = failed
        return None

    def check_checkpoints(self, notes: list[tuple[int, str]]) -> None:
        """Signatures first, then forks between checkpoints, then each root against the entries:
        two signed roots for one size are a fork whichever of them the entries agree with."""
        if self.report.failure is not None:
            return
        signed: list[SignedCheckpoint] = []
        for number, note in notes:
            try:
                signed.append(open_checkpoint(note, self.origin, self.keys.chain))
            except (NoteError, CheckpointError) as error:
                self.fail(f"line {number}: checkpoint refused: {error}")
                return
        by_size: dict[int, SignedCheckpoint] = {}
        for checkpoint in signed:
            size = checkpoint.checkpoint.size
            if size in by_size and (fork := find_fork(by_size[size], checkpoint)) is not None:
                self.report.fork = fork
                self.fail(f"the log signed two different roots for size {size:,}")
                return
            by_size[size] = checkpoint
        end = self.first_index + self.report.entries
        for size, checkpoint in sorted(by_size.items()):
            if size > end:
                self.fail(
                    f"a checkpoint covers {size:,} entries but the bundle ends at {end:,} "
                    "(entries were removed from the end)"
                )
                return
            if self.roots[size] != checkpoint.checkpoint.root_hash:
                self.fail(
                    f"the checkpoint of size {size:,} has root "
                    f"{checkpoint.checkpoint.root_hash.hex()}, but the entries give "
                    f"{self.roots[size].hex()}"
                )
                return
            if self.cosigned(checkpoint):
                self.anchor(size)
        self.report.checkpoints = len(signed)

    def cosigned(self, checkpoint: SignedCheckpoint) -> bool:
        """Whether enough pinned witnesses cosigned ``checkpoint`` for it to anchor entries."""
        witnesses, quorum = self.witnessed
        return len(cosigners(checkpoint.note, witnesses)) >= quorum

    def check_pinned(self, text: bytes | str) -> None:
        """Compare the log with a checkpoint the auditor saw (and kept) earlier."""
        if self.report.failure is not None:
            return
        try:
            # Verified only now: it may be signed by a key the bundle's rotations led to.
            pinned = open_checkpoint(text, self.origin, self.keys.chain)
        except (NoteError, CheckpointError) as error:
            self.fail(f"the pinned checkpoint does not verify: {error}")
            return
        size = pinned.checkpoint.size
        end = self.first_index + self.report.entries
        if size > end:
            self.fail(
                f"the pinned checkpoint covers {size:,} entries but the log now has {end:,}: "
                "the log was truncated or rolled back"
            )
        elif size < self.first_index:
            self.report.warnings.append(
                f"the pinned checkpoint (size {size:,}) predates this bundle; it was not compared"
            )
        elif self.roots[size] != pinned.checkpoint.root_hash:
            self.fail(
                f"the log's tree at size {size:,} has root {self.roots[size].hex()}, not the "
                f"pinned checkpoint's {pinned.checkpoint.root_hash.hex()}: the log was rewritten"
            )
        else:
            self.anchor(size)


class _Workers:
    """Where the costly work runs: decoding entries (canonical JSON, Ed25519) and round checks
    (fairness verifier, re-settlement). Short bundles stay in this process; long ones go to
    worker processes, a bounded window of tasks at a time, while this process checks the chain,
    the tree and the order of events. Results come back in submission order, so the first
    failure found is always the earliest."""

    def __init__(self, vkeys: list[str], count: int, jobs: int | None) -> None:
        self.pool: Any = None
        self.window = 1
        self._batch: list[tuple[int, RoundCheck]] = []
        self._checks: deque[tuple[list[int], AsyncResult[list[str | None]]]] = deque()
        # Short bundles are not worth starting processes for, unless jobs are asked for by number.
        if jobs == 1 or (jobs is None and count < PARALLEL_FROM):
            _init_worker(vkeys)
            return
        workers = jobs or os.cpu_count() or 1
        self.window = 4 * workers
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(workers, initializer=_init_worker, initargs=(vkeys,))

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def decoded(self, items: Iterable[EntryItem]) -> Iterator[tuple[EntryItem, LogEntry | str]]:
        """(item, entry or the reason it was refused) for each entry line, in order."""
        chunks = _chunks(items, CHUNK)
        if self.pool is None:
            for chunk in chunks:
                yield from zip(chunk, _decode_chunk(chunk), strict=True)
            return
        window: deque[tuple[list[EntryItem], AsyncResult[list[LogEntry | str]]]] = deque()
        for chunk in chunks:
            window.append((chunk, self.pool.apply_async(_decode_chunk, (chunk,))))
            if len(window) >= self.window:
                done, result = window.popleft()
                yield from zip(done, result.get(), strict=True)
        while window:
            done, result = window.popleft()
            yield from zip(done, result.get(), strict=True)

    def check(self, index: int, check: RoundCheck) -> Failure | None:
        """Run (or queue) the round check of entry ``index``; a failure found so far, if any."""
        if self.pool is None:
            reason = run_check(check)
            return None if reason is None else Failure(reason, index)
        # One task per batch: a task per check would spend the saving on pickling and queues.
        self._batch.append((index, check))
        if len(self._batch) >= CHECK_BATCH:
            self._submit()
            if len(self._checks) >= self.window:
                return self._collect()
        return None

    def drain(self) -> Failure | None:
        """Wait for every queued check; the earliest failure, if any."""
        if self._batch:
            self._submit()
        while self._checks:
            failed = self._collect()
            if failed is not None:
                self._checks.clear()
                return failed
        return None

    def _submit(self) -> None:
        indices = [index for index, _ in self._batch]
        result = self.pool.apply_async(_run_checks, ([check for _, check in self._batch],))
        self._checks.append((indices, result))
        self._batch = []

    def _collect(self) -> Failure | None:
        indices, result = self._checks.popleft()
        for index, reason in zip(indices, result.get(), strict=True):
            if reason is not None:
                return Failure(reason, index)
        return None


def _run_checks(checks: list[RoundCheck]) -> list[str | None]:
    return [run_check(check) for check in checks]


_WORKER_KEYS: list[Verifier] = []


def _init_worker(vkeys: list[str]) -> None:
    _WORKER_KEYS[:] = [Verifier.from_vkey(vkey) for vkey in vkeys]


def _decode_chunk(chunk: list[EntryItem]) -> list[LogEntry | str]:
    results: list[LogEntry | str] = []
    for data in chunk:
        if isinstance(data, str):  # a line that holds no entry: its reason stands for it
            results.append(data)
            continue
        try:
            results.append(decode_entry(data, *_WORKER_KEYS))
        except EntryError as error:
            # The failure names the entry by its position: the reason alone, not the message.
            results.append(error.reason)
    return results


def _before(first: Failure, second: Failure) -> bool:
    if first.index is None or second.index is None:
        return second.index is None
    return first.index < second.index


def _note_size(note: str) -> int:
    """The size of a checkpoint of the log's own (export reads its store's notes)."""
    return Checkpoint.parse(SignedNote.parse(note).text).size


def _unique(keys: Iterable[Verifier]) -> list[Verifier]:
    unique: list[Verifier] = []
    for key in keys:
        if key not in unique:
            unique.append(key)
    return unique


def _chunks(items: Iterable[EntryItem], size: int) -> Iterator[list[EntryItem]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
