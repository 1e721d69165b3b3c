"""Verifying an audit bundle offline (:mod:`gnau_service.audit.bundle` is its format).

:func:`verify_bundle` checks, and reports the first failure of: each line's form, each entry's
canonical bytes and signature (by the key current at that point: a pinned key, then the keys it
rotated to), the index sequence and hash chain, every checkpoint's signature and root,
consistency with a pinned earlier checkpoint (truncation, rollback and forks), every round
replayed with the fairness verifier and the rules core (:mod:`gnau_service.audit.replay`), and
last whether a signed root covers every entry (the bundle is *anchored*). The costly checks run
in :mod:`gnau_service.audit.bundle_workers`.

It raises only :class:`~gnau_service.audit.bundle.CannotVerifyError`, when verification cannot
start (the header, or an argument, is unusable); everything after the header is content, and a
problem there is a :class:`~gnau_service.audit.bundle_report.Failure` in the report.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from gnau_service.audit.actors import TOKEN_NAME_PATTERN, check_actor
from gnau_service.audit.bundle import (
    BundleHeader,
    CannotVerifyError,
    EntryItem,
    Line,
    LineKind,
    entry_items,
    numbered_lines,
    read_header,
    read_line,
)
from gnau_service.audit.bundle_report import BundleReport, Failure
from gnau_service.audit.bundle_workers import Workers
from gnau_service.audit.checkpoint import (
    Checkpoint,
    CheckpointError,
    SignedCheckpoint,
    find_fork,
    open_checkpoint,
)
from gnau_service.audit.clock_drift import DEFAULT_BOUND_SECONDS, entry_lead
from gnau_service.audit.cosignature import Cosigned, WitnessKey, cosigners
from gnau_service.audit.entries import GENESIS_PREV_HASH, EntryKind, JsonValue, LogEntry, clip
from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.note import NoteError, SignedNote, Verifier
from gnau_service.audit.operators import ALL_OPERATORS, OPERATOR_FIELD, check_operator
from gnau_service.audit.replay import ReplayError, RoundReplay
from gnau_service.audit.signing import RotationError, trusted_keys
from gnau_service.audit.spans import entry_span
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.common.quoting import quoted


class PinnedCheckpointError(CannotVerifyError):
    """The pinned checkpoint is not a well-formed signed checkpoint of the bundle's log."""


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
    only). Raises :class:`~gnau_service.audit.bundle.BundleFormatError` if the first line is not
    a header of this format and :class:`PinnedCheckpointError` if ``pinned_checkpoint`` is
    unusable; otherwise reports the first failure (or none) in a :class:`BundleReport`.
    ``allow_unanchored`` turns an unanchored verdict into a valid one with a warning. With
    ``quorum`` > 0 only a checkpoint that at least ``quorum`` of the ``witnesses`` validly
    cosigned anchors the entries it covers (the others are still checked: signature, root,
    forks)."""
    numbered = numbered_lines(lines)
    header = read_header(next(numbered, None))
    pinned_size = None if pinned_checkpoint is None else _pinned_size(pinned_checkpoint, header)
    verification = _Verification(header, pinned_keys, progress, jobs)
    verification.witnessed = (tuple(witnesses), quorum)
    verification.report.allow_unanchored = allow_unanchored
    body = (read_line(number, line) for number, line in numbered)
    notes: list[tuple[int, str]] = []
    first_entry: list[Line] = []
    for line in body:
        if line.kind is not LineKind.CHECKPOINT:
            first_entry.append(line)
            break
        notes.append((line.number, line.text))
    sizes = verification.checkpoint_sizes(notes)
    if sizes is None:
        return verification.report
    verification.want_roots_at(sizes)
    if pinned_size is not None:
        verification.want_roots_at([pinned_size])
    verification.check_entries(entry_items(itertools.chain(first_entry, body)))
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
        #: The time of the last entry a checkpoint covers, by its size (as roots).
        self.times: dict[int, str] = {}
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
        with Workers(vkeys, count, self.jobs) as workers:
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

    def _check_entries(self, items: Iterable[EntryItem], workers: Workers, count: int) -> None:
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
                self.times[self.frontier.size] = decoded.time
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

    def _follow(self, entry: LogEntry, index: int, workers: Workers) -> str | None:
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
            return _who_failure(entry)
        round_id = entry.round_id
        if not entry.kind.is_round_event or round_id is None:
            return _log_event_failure(entry)
        if round_id in self.partial_rounds:
            return _who_failure(entry)  # replay, which checks them, does not see this round
        if (
            self.first_index
            and entry.kind is not EntryKind.ROUND_COMMITTED
            and not self.replay.knows(round_id)
        ):
            self.partial_rounds.add(round_id)
            return _who_failure(entry)
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
            witnesses, quorum = self.witnessed
            cosigned = cosigners(checkpoint.note, witnesses)
            if len(cosigned) >= quorum:  # enough pinned witnesses cosigned it: it anchors
                self.anchor(size)
            self.compare_clocks(size, cosigned)
        self.report.checkpoints = len(signed)

    def compare_clocks(self, size: int, cosigned: Sequence[Cosigned]) -> None:
        """How far the newest entry under the checkpoint of ``size`` is stamped past each pinned
        witness's cosignature of it (:mod:`~gnau_service.audit.clock_drift`): the largest is
        reported, and one beyond the bound is warned of, once."""
        time = self.times.get(size)
        if time is None:
            return  # the checkpoint covers no entry of the bundle
        stamped = parse_utc_timestamp(time).timestamp()
        report = self.report
        for witness in cosigned:
            lead = entry_lead(stamped, witness.timestamp)
            if report.entry_lead_seconds is not None and lead <= report.entry_lead_seconds:
                continue
            was = report.entry_lead_seconds
            report.entry_lead_seconds = lead
            if lead > DEFAULT_BOUND_SECONDS and (was is None or was <= DEFAULT_BOUND_SECONDS):
                report.warnings.append(
                    f"entry {size - 1:,} is stamped {lead:.1f} s after witness "
                    f"{witness.key.name!r} cosigned the checkpoint of size {size:,} (more than "
                    f"{DEFAULT_BOUND_SECONDS:g} s): the dealer's clock ran ahead, or the "
                    "witness's behind, so entry times near it may be off"
                )

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


_ACTOR: Final = "actor"


def _who_failure(entry: LogEntry) -> str | None:
    """Why the entry's ``actor`` or ``operator`` (each optional: older logs have neither) is not
    one, or None."""
    for member, check in ((_ACTOR, check_actor), (OPERATOR_FIELD, check_operator)):
        if member in entry.payload:
            problem = check(entry.payload[member])
            if problem is not None:
                return f"{entry.kind}'s {clip(problem)}"
    return None


def _log_event_failure(entry: LogEntry) -> str | None:
    """What is wrong with an event of the log rather than of a round, or None. Only the events
    that could name someone they must not are held to a form: a forgotten player's, a stop's, a
    token change's (which names tokens by name and role, never by the token or its hash)."""
    payload, kind = entry.payload, entry.kind
    if kind is EntryKind.PLAYER_FORGOTTEN and set(payload) - {_ACTOR, OPERATOR_FIELD}:
        # The event names no one: a member here could only be a player or a reference.
        return (
            "PLAYER_FORGOTTEN's payload must be empty or hold only its actor and operator (it "
            "names no player)"
        )
    if kind is EntryKind.SERVICE_STOPPED and set(payload) - {_ACTOR}:
        return "SERVICE_STOPPED's payload must hold only its actor"
    if kind is EntryKind.TOKENS_CHANGED:
        problem = _tokens_changed_failure(payload)
        if problem is not None:
            return f"TOKENS_CHANGED {problem}"
    members = _EXACT_MEMBERS.get(kind)
    if members is not None and set(payload) != members:
        # A catalogue change names tables, operators and limits, and a software check files and
        # distributions; a member beyond its own could carry what the log must not hold.
        return f"{kind}'s payload must hold exactly {', '.join(sorted(members))}"
    return _who_failure(entry)


#: The events whose payload holds exactly these members (docs/audit.md, *Events of the log*).
_EXACT_MEMBERS: Final = {
    EntryKind.TABLE_CHANGED: {_ACTOR, OPERATOR_FIELD, "table_id", "version", "config"},
    EntryKind.OPERATOR_CHANGED: {_ACTOR, OPERATOR_FIELD, "config"},
    EntryKind.GAMING_CHANGED: {_ACTOR, "enabled"},
    EntryKind.SOFTWARE_VERIFIED: {
        _ACTOR,
        "result",
        "manifest_sha256",
        "mismatches",
        "mismatch_count",
        "detail",
    },
}


def _tokens_changed_failure(payload: dict[str, JsonValue]) -> str | None:
    if set(payload) != {_ACTOR, "added", "revoked"}:
        return "must hold exactly actor, added and revoked"
    for member in ("added", "revoked"):
        tokens = payload[member]
        if not isinstance(tokens, list):
            return f"{member} must be a list"
        for token in tokens:
            if not _is_listed_token(token):
                return (
                    f"{member} must list tokens as {{name, role, operator}} alone, a token "
                    f"file's name, a role and an operator id or '*', not {quoted(token)}"
                )
    return None


def _is_listed_token(token: JsonValue) -> bool:
    """A token as TOKENS_CHANGED names it: its name, its role and, but for a public token or one
    logged before operators, its operator (an operator id, or ``*`` for every operator)."""
    if not isinstance(token, dict) or set(token) - {OPERATOR_FIELD} != {"name", "role"}:
        return False
    name, role, operator = token["name"], token["role"], token.get(OPERATOR_FIELD)
    return (
        isinstance(name, str)
        and TOKEN_NAME_PATTERN.fullmatch(name) is not None
        and isinstance(role, str)
        and role.isascii()
        and role.isalpha()
        and (
            OPERATOR_FIELD not in token
            or operator == ALL_OPERATORS
            or check_operator(operator) is None
        )
    )


def _before(first: Failure, second: Failure) -> bool:
    if first.index is None or second.index is None:
        return second.index is None
    return first.index < second.index


def _unique(keys: Iterable[Verifier]) -> list[Verifier]:
    unique: list[Verifier] = []
    for key in keys:
        if key not in unique:
            unique.append(key)
    return unique
