"""Audit bundles: the log in one portable file, and the offline verification auditors run.

A bundle is JSON lines (UTF-8), in this order:

1. a header: ``{"format": "gnau-dealer/audit-bundle/v1", "origin": ..., "public_keys": [vkey,
   ...], "first_index": F, "size": N, "left_frontier": [hex, ...]}``. The bundle holds entries
   ``F`` to ``N - 1``; ``left_frontier`` is the Merkle frontier of the entries before ``F`` (empty
   when ``F`` is 0), so the roots of the bundle's checkpoints can be recomputed from it alone;
2. every signed checkpoint with a size in ``F + 1 .. N``: ``{"checkpoint": "<note text>"}``;
3. every entry in index order: ``{"entry": "<the entry's canonical JSON text>"}`` (its index is
   inside it).

:func:`verify_bundle` checks, and reports the first failure of: each entry's canonical bytes and
signature (by the key current at that point: a pinned key, then the keys it rotated to), the
index sequence and hash chain, every checkpoint's signature and root, consistency with a pinned
earlier checkpoint (truncation, rollback and forks), and then replays every round with the
fairness verifier and the rules core (:mod:`gnau_service.audit.rounds`).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing.pool import AsyncResult
from typing import Any, Final, Protocol, TextIO

from gnau_service.audit.checkpoint import (
    CheckpointError,
    ForkEvidence,
    SignedCheckpoint,
    find_fork,
    open_checkpoint,
)
from gnau_service.audit.entries import (
    GENESIS_PREV_HASH,
    EntryError,
    EntryKind,
    LogEntry,
    decode_entry,
)
from gnau_service.audit.merkle import Frontier, leaf_hash
from gnau_service.audit.note import NoteError, SignedNote, Verifier
from gnau_service.audit.rounds import ReplayError, RoundCheck, RoundReplay, run_check
from gnau_service.audit.signing import RotationError, trusted_keys

BUNDLE_FORMAT: Final = "gnau-dealer/audit-bundle/v1"
CHUNK: Final = 2_000
CHECK_BATCH: Final = 500
PARALLEL_FROM: Final = 20_000


class BundleFormatError(ValueError):
    """A bundle that cannot be read at all (not JSON lines, no header, a malformed line)."""


class LogSource(Protocol):
    """What exporting needs from a store (``gnau_service.store.LogReader`` has it)."""

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]: ...
    def checkpoints(self) -> list[str]: ...
    def public_keys(self) -> list[str]: ...
    def frontier(self, size: int) -> Frontier: ...


def write_bundle(source: LogSource, out: TextIO, *, first_index: int = 0, end: int) -> int:
    """Write entries ``first_index`` to ``end - 1`` with their checkpoints; returns the count.

    ``end`` should be the size of a checkpoint, so the bundle's last root can be checked.
    """
    notes = [note for note in source.checkpoints() if first_index < _note_size(note) <= end]
    if not notes:
        raise BundleFormatError(f"the log has no checkpoint of a size from {first_index + 1}")
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

    def __str__(self) -> str:
        return self.reason if self.index is None else f"entry {self.index}: {self.reason}"


@dataclass
class BundleReport:
    """What :func:`verify_bundle` found."""

    first_index: int = 0
    entries: int = 0
    checkpoints: int = 0
    rounds_settled: int = 0
    rounds_voided: int = 0
    rounds_open: int = 0
    rounds_partial: int = 0
    failure: Failure | None = None
    fork: ForkEvidence | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        last = self.first_index + self.entries - 1
        lines = [
            f"entries: {self.entries:,} verified (indices {self.first_index:,} to {last:,})",
            f"checkpoints: {self.checkpoints:,} verified",
            f"rounds: {self.rounds_settled:,} settled and replayed, {self.rounds_voided:,} voided,"
            f" {self.rounds_open:,} still open"
            + (
                f", {self.rounds_partial:,} only partly in this bundle"
                if self.rounds_partial
                else ""
            ),
        ]
        lines += [f"warning: {warning}" for warning in self.warnings]
        if self.fork is not None:
            lines.append(f"FORK: {self.fork.reason}")
            lines.append(f"  checkpoint 1:\n{_indent(str(self.fork.older.note))}")
            lines.append(f"  checkpoint 2:\n{_indent(str(self.fork.newer.note))}")
        lines.append("result: VALID" if self.ok else f"result: INVALID: {self.failure}")
        return "\n".join(lines)


Progress = Callable[[int, int], None]


def verify_bundle(
    lines: Iterable[str],
    *,
    pinned_keys: Sequence[Verifier] = (),
    pinned_checkpoint: str | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
) -> BundleReport:
    """Verify a bundle read line by line. Raises :class:`BundleFormatError` if it is unreadable;
    otherwise reports the first failure (or none) in a :class:`BundleReport`."""
    objects = _json_lines(lines)
    header = _read_header(next(objects, None))
    verification = _Verification(header, pinned_keys, progress, jobs)
    notes: list[str] = []
    first_entry: list[dict[str, Any]] = []
    for obj in objects:
        if "checkpoint" not in obj:
            first_entry.append(obj)
            break
        notes.append(_text(obj, "checkpoint"))
    verification.want_roots_at(_note_size(note) for note in notes)
    if pinned_checkpoint is not None:
        verification.want_roots_at([_note_size(pinned_checkpoint)])
    verification.check_entries(itertools.chain(first_entry, objects))
    verification.check_checkpoints(notes)
    if pinned_checkpoint is not None:
        verification.check_pinned(pinned_checkpoint)
    return verification.report


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
        header: dict[str, Any],
        pinned_keys: Sequence[Verifier],
        progress: Progress | None,
        jobs: int | None,
    ) -> None:
        self.origin: str = header["origin"]
        self.first_index: int = header["first_index"]
        self.size: int = header["size"]
        self.report = BundleReport(first_index=self.first_index)
        self.progress = progress
        self.jobs = jobs
        bundle_keys = [_verifier(vkey, "public_keys") for vkey in header["public_keys"]]
        if pinned_keys:
            self.keys = _KeyChain(pinned_keys[0])
        elif bundle_keys:
            self.report.warnings.append(
                "no key was pinned (--key): the bundle's own first key is trusted, which proves "
                "integrity but not authorship"
            )
            self.keys = _KeyChain(bundle_keys[0])
        else:
            raise BundleFormatError("the bundle lists no public key and none was pinned")
        self.candidates = _unique([*pinned_keys, *bundle_keys])
        try:
            hashes = tuple(bytes.fromhex(node) for node in header["left_frontier"])
            self.frontier = Frontier(self.first_index, hashes)
        except (TypeError, ValueError) as error:
            raise BundleFormatError(f"header left_frontier: {error}") from None
        self.roots: dict[int, bytes] = {}
        self.wanted_sizes: set[int] = set()
        self.replay = RoundReplay()
        self.partial_rounds: set[str] = set()

    def want_roots_at(self, sizes: Iterable[int]) -> None:
        self.wanted_sizes.update(sizes)
        if self.first_index in self.wanted_sizes:
            self.roots[self.first_index] = self.frontier.root()

    def fail(self, reason: str, index: int | None = None) -> None:
        if self.report.failure is None:
            self.report.failure = Failure(reason, index)

    def check_entries(self, objects: Iterable[dict[str, Any]]) -> None:
        count = self.size - self.first_index
        vkeys = [key.vkey for key in self.candidates]
        with _Workers(vkeys, count, self.jobs) as workers:
            self._check_entries(objects, workers, count)
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
                f"the header announces entries up to {self.size - 1:,}, but the bundle holds "
                f"{report.entries:,} from {self.first_index:,} (truncated or padded)"
            )

    def _check_entries(
        self, objects: Iterable[dict[str, Any]], workers: _Workers, count: int
    ) -> None:
        report = self.report
        expected_prev = GENESIS_PREV_HASH if self.first_index == 0 else None
        if self.first_index:
            report.warnings.append(
                f"the bundle starts at entry {self.first_index:,}: entries before it, and rounds "
                "begun before it, are not checked"
            )
        index = self.first_index
        for data, decoded in workers.decoded(objects):
            failure = self._entry_failure(decoded, index, expected_prev)
            if failure is not None:
                self.fail(failure, index)
                return
            assert isinstance(decoded, LogEntry)
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

    def check_checkpoints(self, notes: list[str]) -> None:
        """Signatures first, then forks between checkpoints, then each root against the entries:
        two signed roots for one size are a fork whichever of them the entries agree with."""
        if self.report.failure is not None:
            return
        signed: list[SignedCheckpoint] = []
        for note in notes:
            try:
                signed.append(open_checkpoint(note, self.origin, self.keys.chain))
            except (NoteError, CheckpointError) as error:
                self.fail(f"checkpoint refused: {error}")
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
            if size in self.roots and self.roots[size] != checkpoint.checkpoint.root_hash:
                self.fail(
                    f"the checkpoint of size {size:,} has root "
                    f"{checkpoint.checkpoint.root_hash.hex()}, but the entries give "
                    f"{self.roots[size].hex()}"
                )
                return
        self.report.checkpoints = len(signed)

    def check_pinned(self, text: str) -> None:
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

    def decoded(self, objects: Iterable[dict[str, Any]]) -> Iterator[tuple[bytes, LogEntry | str]]:
        """(bytes, entry or the reason it was refused) for each entry line, in order."""
        chunks = _chunks((_text(obj, "entry").encode("utf-8") for obj in objects), CHUNK)
        if self.pool is None:
            for chunk in chunks:
                yield from zip(chunk, _decode_chunk(chunk), strict=True)
            return
        window: deque[tuple[list[bytes], AsyncResult[list[LogEntry | str]]]] = deque()
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


def _decode_chunk(chunk: list[bytes]) -> list[LogEntry | str]:
    results: list[LogEntry | str] = []
    for data in chunk:
        try:
            results.append(decode_entry(data, *_WORKER_KEYS))
        except EntryError as error:
            results.append(str(error))
    return results


# -- reading ---------------------------------------------------------------------------------------


def _before(first: Failure, second: Failure) -> bool:
    if first.index is None or second.index is None:
        return second.index is None
    return first.index < second.index


def _json_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            raise BundleFormatError(f"line {number}: not JSON ({error.msg})") from None
        if not isinstance(obj, dict):
            raise BundleFormatError(f"line {number}: not a JSON object")
        yield obj


def _read_header(obj: dict[str, Any] | None) -> dict[str, Any]:
    if obj is None:
        raise BundleFormatError("the bundle is empty")
    if obj.get("format") != BUNDLE_FORMAT:
        raise BundleFormatError(f"the first line is not a {BUNDLE_FORMAT} header")
    for key, kind in (
        ("origin", str),
        ("public_keys", list),
        ("first_index", int),
        ("size", int),
        ("left_frontier", list),
    ):
        if not isinstance(obj.get(key), kind) or isinstance(obj.get(key), bool):
            raise BundleFormatError(f"header field {key!r} is missing or not a {kind.__name__}")
    if not 0 <= obj["first_index"] <= obj["size"]:
        raise BundleFormatError("header first_index and size are out of order")
    return obj


def _text(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise BundleFormatError(f"{key!r} must be a string")
    return value


def _verifier(vkey: object, where: str) -> Verifier:
    if not isinstance(vkey, str):
        raise BundleFormatError(f"{where}: a key must be a string")
    try:
        return Verifier.from_vkey(vkey)
    except NoteError as error:
        raise BundleFormatError(f"{where}: {error}") from None


def _note_size(note: str) -> int:
    lines = note.split("\n")
    try:
        return int(lines[1])
    except (IndexError, ValueError):
        raise BundleFormatError(f"not a checkpoint: {note[:60]!r}") from None


def _unique(keys: Iterable[Verifier]) -> list[Verifier]:
    unique: list[Verifier] = []
    for key in keys:
        if key not in unique:
            unique.append(key)
    return unique


def _chunks(items: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
