"""Round receipts: one self-contained JSON document that proves one round, checked offline with
the log's public key alone (``docs/receipts.md`` is the format, byte by byte).

A receipt holds the round in the verifiable form of ``docs/fairness.md``, every audit entry of
the round with its inclusion proof, the signed checkpoint the proofs lead to, the key rotations
from older keys, and, when asked for, a consistency proof from a checkpoint the reader pinned.
:func:`verify_receipt` checks it in a fixed order of **steps** and names the first that fails:

1. ``fairness``: the round's commitment, lock transcript, deck and every hand recompute;
2. ``entries``: each entry is canonical, signed by a trusted key, of this round, in log order;
3. ``round``: the round document is what those entries published;
4. ``outcome``: the logged settlement follows from the hands (evaluation and deltas
   re-derived), or a void's seed matches the commitment;
5. ``checkpoint``: the checkpoint is this log's, signed by a trusted key, cosigned by at least
   ``quorum`` of the pinned witnesses (C2SP tlog-cosignature; when asked for), and covers every
   entry;
6. ``inclusion``: each entry's proof leads from its leaf to the checkpoint's root;
7. ``consistency``: a pinned checkpoint (if any) and the receipt's are one history.

Trusted keys are the pinned key and each key a rotation note signed by the key before hands over
to (so pin the key of the round's time, or older). A document that is not a receipt at all
(not JSON, another format, members missing or of the wrong type) is a :class:`ReceiptFormatError`:
unreadable, not invalid.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from gnau_service.audit.checkpoint import CheckpointError, SignedCheckpoint, open_checkpoint
from gnau_service.audit.cosignature import QuorumError, WitnessKey, require_quorum
from gnau_service.audit.entries import EntryError, EntryKind, LogEntry, decode_entry, is_hash_hex
from gnau_service.audit.merkle import ProofError, leaf_hash, verify_consistency, verify_inclusion
from gnau_service.audit.note import NoteError, Verifier
from gnau_service.audit.operators import OPERATOR_FIELD
from gnau_service.audit.replay import ReplayError, RoundCheck, RoundReplay
from gnau_service.audit.round_events import (
    CURRENCY_FIELD,
    DEALT_FIELDS,
    DISCLOSED_FIELD,
    REVEALED_FIELDS,
    committed_version,
)
from gnau_service.audit.signing import RotationError, TrustedKey, trusted_keys
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.common.quoting import quoted
from gnau_service.common.strict_json import (
    JsonTextError,
    MembersError,
    NotAnObjectError,
    json_type,
    read_json,
    read_object,
)
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.reveal import REVEALED_ROUND_FORMATS, RevealedRound
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.currency import Currency
from gnau_service.rules.return_to_player import ReturnToPlayer

RECEIPT_FORMAT: Final = "gnau-dealer/round-receipt/v1"
_MEMBERS: Final = (
    "format",
    "round_id",
    "round",
    "entries",
    "checkpoint",
    "key_rotations",
    "consistency",
)
_ENTRY_MEMBERS: Final = ("index", "entry", "inclusion_proof")
_CONSISTENCY_MEMBERS: Final = ("first_size", "proof")
#: A round has at most four entries (commit, deal, reveal, settle); a receipt may list no more.
MAX_ENTRIES: Final = 4
#: Hashes in a proof, at most: the tree of a 2^63-entry log is 63 levels deep.
MAX_PROOF_HASHES: Final = 64


class Step(StrEnum):
    """The checks of a receipt, in the order they run."""

    FAIRNESS = "fairness"
    ENTRIES = "entries"
    ROUND = "round"
    OUTCOME = "outcome"
    CHECKPOINT = "checkpoint"
    INCLUSION = "inclusion"
    CONSISTENCY = "consistency"


class ReceiptFormatError(ValueError):
    """A document that is not a receipt of this format: nothing in it can be checked."""


@dataclass(frozen=True)
class ReceiptEntry:
    """One of the round's log entries: its index, its exact bytes, and its inclusion proof."""

    index: int
    data: bytes
    inclusion_proof: tuple[bytes, ...]


@dataclass(frozen=True)
class Consistency:
    """The proof that the tree of ``first_size`` entries is a prefix of the checkpoint's."""

    first_size: int
    proof: tuple[bytes, ...]


@dataclass(frozen=True)
class Receipt:
    round_id: str
    #: The round in the verifiable form of docs/fairness.md; None for a round voided before
    #: its deal (nothing was dealt: its void's seed is checked against its commitment).
    round: dict[str, Any] | None
    entries: tuple[ReceiptEntry, ...]
    checkpoint: str
    key_rotations: tuple[str, ...] = ()
    consistency: Consistency | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RECEIPT_FORMAT,
            "round_id": self.round_id,
            "round": self.round,
            "entries": [
                {
                    "index": entry.index,
                    "entry": entry.data.decode("utf-8"),
                    "inclusion_proof": [node.hex() for node in entry.inclusion_proof],
                }
                for entry in self.entries
            ],
            "checkpoint": self.checkpoint,
            "key_rotations": list(self.key_rotations),
            "consistency": None
            if self.consistency is None
            else {
                "first_size": self.consistency.first_size,
                "proof": [node.hex() for node in self.consistency.proof],
            },
        }

    def to_text(self) -> str:
        """The receipt as a file holds it: indented JSON, UTF-8, a final newline."""
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_text(cls, text: str | bytes) -> Receipt:
        try:
            obj = read_json(text)
        except JsonTextError as error:
            raise ReceiptFormatError(str(error)) from None
        return cls.from_json(obj)

    @classmethod
    def from_json(cls, obj: object) -> Receipt:
        top = _members(obj, "the receipt", _MEMBERS)
        if top["format"] != RECEIPT_FORMAT:
            raise ReceiptFormatError(f"format is {quoted(top['format'])}, not {RECEIPT_FORMAT!r}")
        round_id = _typed(top, "round_id", str, "the receipt")
        round_ = top["round"]
        if round_ is not None and not isinstance(round_, dict):
            raise ReceiptFormatError(f"round must be an object or null, not {json_type(round_)}")
        entries = _typed(top, "entries", list, "the receipt")
        if not 1 <= len(entries) <= MAX_ENTRIES:
            raise ReceiptFormatError(f"entries must hold 1 to {MAX_ENTRIES}, not {len(entries)}")
        rotations = _typed(top, "key_rotations", list, "the receipt")
        if not all(isinstance(note, str) for note in rotations):
            raise ReceiptFormatError("key_rotations must be strings (signed notes)")
        consistency = top["consistency"]
        return cls(
            round_id=round_id,
            round=round_,
            entries=tuple(_entry(item, position) for position, item in enumerate(entries)),
            checkpoint=_typed(top, "checkpoint", str, "the receipt"),
            key_rotations=tuple(rotations),
            consistency=None if consistency is None else _consistency(consistency),
        )


@dataclass(frozen=True)
class StepFailure:
    step: Step
    reason: str

    def __str__(self) -> str:
        return f"{self.step}: {self.reason}"


@dataclass
class ReceiptReport:
    """What :func:`verify_receipt` found: every step passed, or the first that failed."""

    round_id: str
    passed: list[Step] = field(default_factory=list)
    failure: StepFailure | None = None
    state: str = ""
    checkpoint_size: int = 0
    pinned_size: int | None = None
    #: The pinned witnesses whose cosignatures of the checkpoint verified (when a quorum was
    #: asked for).
    cosigned_by: list[str] = field(default_factory=list)
    #: The rule set's return to player its ROUND_COMMITTED entry disclosed (None before the
    #: figures were logged).
    return_to_player: ReturnToPlayer | None = None
    #: The operator the round's entries name (replay has held them to one); None for a round
    #: logged before operators, which is the default operator's.
    operator: str | None = None
    #: The currency its stakes and settlement are counted in, as its ROUND_COMMITTED names it
    #: (None for a round from before the table catalogue).
    currency: Currency | None = None
    #: A step that could not be checked because the receipt lacks what it needs (a consistency
    #: proof from the pinned size): not evidence of tampering. Every step before it passed.
    unchecked: StepFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.unchecked is None

    def summary(self) -> str:
        if self.failure is not None:
            return f"round {self.round_id}: INVALID at step {self.failure}"
        if self.unchecked is not None:
            return (
                f"round {self.round_id}: CANNOT CHECK step {self.unchecked} ("
                f"{', '.join(self.passed)} hold; nothing is known to be wrong)"
            )
        pinned = (
            f"; one history with the pinned checkpoint of size {self.pinned_size:,}"
            if self.pinned_size is not None
            else ""
        )
        cosigned = (
            f", cosigned by {len(self.cosigned_by)} witnesses ({', '.join(self.cosigned_by)})"
            if self.cosigned_by
            else ""
        )
        disclosed = (
            ""
            if self.return_to_player is None
            else f"; disclosed return to player {self.return_to_player.to_json()['rtp_decimal']}"
        )
        operator = "" if self.operator is None else f"; operator {self.operator}"
        currency = (
            ""
            if self.currency is None
            else f"; amounts in {self.currency.code} minor units (exponent"
            f" {self.currency.exponent})"
        )
        return (
            f"round {self.round_id}: VALID ({self.state}): {', '.join(self.passed)} all hold; "
            f"in the log's signed tree of {self.checkpoint_size:,} entries{cosigned}{pinned}"
            f"{disclosed}{operator}{currency}"
        )


class _Failed(Exception):  # noqa: N818  (control flow: the first failing step)
    def __init__(self, step: Step, reason: str) -> None:
        super().__init__(reason)
        self.failure = StepFailure(step, reason)


class _Unchecked(_Failed):
    """A step the receipt does not carry enough to check (see ReceiptReport.unchecked)."""


def verify_receipt(
    receipt: Receipt,
    pinned_keys: Sequence[Verifier],
    pinned_checkpoint: str | None = None,
    *,
    witnesses: Sequence[WitnessKey] = (),
    quorum: int = 0,
) -> ReceiptReport:
    """Check ``receipt`` step by step (see the module) against the pinned log key(s) and,
    optionally, a signed checkpoint seen earlier. With ``quorum`` > 0 its checkpoint must carry
    valid cosignatures from at least that many of the ``witnesses`` (others are ignored)."""
    report = ReceiptReport(receipt.round_id)
    try:
        _verify(receipt, pinned_keys, pinned_checkpoint, report, (witnesses, quorum))
    except _Unchecked as unchecked:
        report.unchecked = unchecked.failure
    except _Failed as failed:
        report.failure = failed.failure
    return report


def _verify(
    receipt: Receipt,
    pinned_keys: Sequence[Verifier],
    pinned_checkpoint: str | None,
    report: ReceiptReport,
    witnessed: tuple[Sequence[WitnessKey], int],
) -> None:
    revealed = _fairness(receipt)
    report.passed.append(Step.FAIRNESS)
    chain = _trusted(pinned_keys, receipt.key_rotations)
    keys = [key.verifier for key in chain]
    entries, checks = _entries(receipt, chain)
    report.passed.append(Step.ENTRIES)
    report.return_to_player = _disclosed(entries)
    operator = entries[0].payload.get(OPERATOR_FIELD)
    report.operator = operator if isinstance(operator, str) else None
    with contextlib.suppress(ValueError):  # a malformed one fails the round's replay below
        report.currency = Currency.from_json(entries[0].payload.get(CURRENCY_FIELD))
    _same_round(receipt, revealed, _published(entries))
    report.passed.append(Step.ROUND)
    for check in checks:
        try:
            check.run()
        except ReplayError as error:
            raise _Failed(Step.OUTCOME, str(error)) from None
    report.state = str(entries[-1].kind).removeprefix("ROUND_").lower()
    report.passed.append(Step.OUTCOME)
    signed = _checkpoint(receipt, keys, pinned_keys)
    witnesses, quorum = witnessed
    if quorum:
        try:
            report.cosigned_by = [
                c.key.name for c in require_quorum(signed.note, witnesses, quorum)
            ]
        except QuorumError as error:
            raise _Failed(Step.CHECKPOINT, str(error)) from None
    report.checkpoint_size = signed.checkpoint.size
    report.passed.append(Step.CHECKPOINT)
    _inclusion(receipt, signed)
    report.passed.append(Step.INCLUSION)
    if pinned_checkpoint is not None:
        report.pinned_size = _consistency_with(receipt, signed, pinned_checkpoint, keys)
        report.passed.append(Step.CONSISTENCY)


def _fairness(receipt: Receipt) -> RevealedRound | None:
    if receipt.round is None:
        return None  # voided before its deal: the outcome step checks its seed
    try:
        revealed = RevealedRound.from_json(receipt.round)
    except FairnessError as error:
        raise _Failed(Step.FAIRNESS, f"the round is not a revealed round: {error}") from None
    if revealed.round_id != receipt.round_id:
        raise _Failed(
            Step.FAIRNESS,
            f"the round is {quoted(revealed.round_id)}, the receipt is for "
            f"{quoted(receipt.round_id)}",
        )
    first = verify_revealed_round(revealed).first_failure
    if first is not None:
        raise _Failed(Step.FAIRNESS, str(first))
    return revealed


def _trusted(pinned_keys: Sequence[Verifier], rotations: Sequence[str]) -> list[TrustedKey]:
    """The pinned keys, and every key the rotations hand over to from one of them, each with
    the times it was current."""
    chain = [TrustedKey(key, None, None) for key in pinned_keys]
    for pinned in pinned_keys:
        try:
            handed_over = trusted_keys(pinned, rotations)
        except (NoteError, RotationError):
            continue  # rotations from another pinned key
        chain = [key for key in chain if key.verifier != pinned] + list(handed_over)
    return chain


def _current_at(chain: Sequence[TrustedKey], key_id: str, time: str) -> bool:
    """Whether the key ``key_id`` was current at ``time``: a retired key signs nothing after its
    rotation, a new one nothing before it (an entry at the rotation's own time may be either's:
    the rotation and the entries around it share their batch's time)."""
    instant = parse_utc_timestamp(time)
    return any(
        key.verifier.key_id.hex() == key_id
        and (key.since is None or parse_utc_timestamp(key.since) <= instant)
        and (key.until is None or instant <= parse_utc_timestamp(key.until))
        for key in chain
    )


def _entries(
    receipt: Receipt, chain: Sequence[TrustedKey]
) -> tuple[list[LogEntry], list[RoundCheck]]:
    """The round's entries, decoded and in the order of a round's life; and what replaying them
    leaves to check (the outcome step)."""
    entries: list[LogEntry] = []
    replay = RoundReplay()
    checks: list[RoundCheck] = []
    for position, item in enumerate(receipt.entries):
        try:
            entry = decode_entry(item.data, *(key.verifier for key in chain))
        except EntryError as error:
            raise _Failed(Step.ENTRIES, f"entry {item.index}: {error.reason}") from None
        if not _current_at(chain, entry.key_id, entry.time):
            raise _Failed(
                Step.ENTRIES,
                f"entry {entry.index} is signed by key {entry.key_id}, which was not the log's "
                f"key at {entry.time}",
            )
        if entry.index != item.index:
            raise _Failed(
                Step.ENTRIES,
                f"entries[{position}] says index {entry.index}, listed as {item.index}",
            )
        if entries and entry.index <= entries[-1].index:
            raise _Failed(
                Step.ENTRIES, f"entry {entry.index} is not after entry {entries[-1].index}"
            )
        if entry.round_id != receipt.round_id or not entry.kind.is_round_event:
            raise _Failed(
                Step.ENTRIES,
                f"entry {entry.index} is {entry.kind} of {quoted(entry.round_id)}, not an event of "
                f"round {quoted(receipt.round_id)}",
            )
        try:
            check = replay.stage(entry.kind, receipt.round_id, entry.payload)
        except ReplayError as error:
            raise _Failed(Step.ENTRIES, str(error)) from None
        if check is not None:
            checks.append(check)
        entries.append(entry)
    if not {EntryKind.ROUND_REVEALED, EntryKind.ROUND_VOIDED} & {e.kind for e in entries}:
        raise _Failed(Step.ENTRIES, "no entry reveals the round's seed (a reveal or a void)")
    return entries, checks


def _published(entries: list[LogEntry]) -> dict[str, Any]:
    """The fields the entries published, merged as docs/fairness.md's revealed round, in the
    format of the version the commitment states (replay has checked it)."""
    document: dict[str, Any] = {}
    for entry in entries:
        if entry.kind is EntryKind.ROUND_COMMITTED:
            document["format"] = REVEALED_ROUND_FORMATS[committed_version(entry.payload)]
        fields = {
            EntryKind.ROUND_COMMITTED: ("house_rules", "commitment"),  # not its table_id
            EntryKind.ROUND_DEALT: DEALT_FIELDS,
            EntryKind.ROUND_REVEALED: REVEALED_FIELDS,
            EntryKind.ROUND_VOIDED: ("server_seed",),
        }.get(entry.kind, ())
        document |= {key: entry.payload.get(key) for key in fields}
    return document


def _disclosed(entries: list[LogEntry]) -> ReturnToPlayer | None:
    """The figures the round's commitment disclosed (replay has checked their form)."""
    for entry in entries:
        if entry.kind is EntryKind.ROUND_COMMITTED and DISCLOSED_FIELD in entry.payload:
            return ReturnToPlayer.from_json(entry.payload[DISCLOSED_FIELD])
    return None


def _same_round(
    receipt: Receipt, revealed: RevealedRound | None, published: dict[str, Any]
) -> None:
    dealt = "seats" in published
    if revealed is None:
        if dealt:
            raise _Failed(Step.ROUND, "the log dealt this round, but the receipt has no round")
        return
    if not dealt:
        raise _Failed(Step.ROUND, "the receipt has a dealt round, but the log never dealt it")
    ours = revealed.to_json()
    try:
        # Read as the verifier reads the receipt's round, so only meaning is compared (seat
        # order, hex case); a deck the log never published (a void) is the receipt's own.
        theirs = RevealedRound.from_json(
            {
                **published,
                "round_id": receipt.round_id,
                "deck": published.get("deck", ours["deck"]),
            }
        ).to_json()
    except FairnessError as error:
        raise _Failed(Step.ROUND, f"the entries do not form a round: {error}") from None
    for key, value in ours.items():
        if theirs.get(key) != value:
            raise _Failed(Step.ROUND, f"{key} differs from what the log published")


def _checkpoint(
    receipt: Receipt, keys: Sequence[Verifier], pinned_keys: Sequence[Verifier]
) -> SignedCheckpoint:
    origins = {key.name for key in pinned_keys}
    failure: Exception | None = None
    for origin in sorted(origins):
        try:
            signed = open_checkpoint(receipt.checkpoint, origin, keys)
            break
        except (NoteError, CheckpointError) as error:
            failure = error
    else:
        raise _Failed(Step.CHECKPOINT, str(failure)) from None
    last = receipt.entries[-1].index
    if signed.checkpoint.size <= last:
        raise _Failed(
            Step.CHECKPOINT,
            f"the checkpoint's tree of {signed.checkpoint.size:,} entries does not reach entry "
            f"{last:,}",
        )
    return signed


def _inclusion(receipt: Receipt, signed: SignedCheckpoint) -> None:
    size, root = signed.checkpoint.size, signed.checkpoint.root_hash
    for item in receipt.entries:
        try:
            verify_inclusion(leaf_hash(item.data), item.index, size, item.inclusion_proof, root)
        except ProofError as error:
            raise _Failed(
                Step.INCLUSION, f"entry {item.index} is not in the checkpoint's tree: {error}"
            ) from None


def _consistency_with(
    receipt: Receipt, signed: SignedCheckpoint, pinned: str, keys: Sequence[Verifier]
) -> int:
    origin = signed.checkpoint.origin
    try:
        pin = open_checkpoint(pinned, origin, keys).checkpoint
    except (NoteError, CheckpointError) as error:
        raise _Failed(Step.CONSISTENCY, f"the pinned checkpoint does not open: {error}") from None
    size, root = signed.checkpoint.size, signed.checkpoint.root_hash
    if pin.size == 0:
        return 0  # every log extends its empty beginning: nothing to prove
    if pin.size == size:
        if pin.root_hash != root:
            raise _Failed(Step.CONSISTENCY, f"two signed roots for size {size:,}: a fork")
        return pin.size
    if pin.size > size:
        raise _Unchecked(
            Step.CONSISTENCY,
            f"the pinned checkpoint ({pin.size:,} entries) is newer than the receipt's "
            f"({size:,}): get the receipt again with this pin",
        )
    proof = receipt.consistency
    if proof is None or proof.first_size != pin.size:
        raise _Unchecked(
            Step.CONSISTENCY,
            f"the receipt carries no consistency proof from size {pin.size:,}: get it again"
            " with that pin",
        )
    try:
        verify_consistency(pin.size, size, proof.proof, pin.root_hash, root)
    except ProofError as error:
        raise _Failed(
            Step.CONSISTENCY, f"the pinned tree is not a prefix of the receipt's: {error}"
        ) from None
    return pin.size


# -- reading ---------------------------------------------------------------------------------


def _members(obj: object, what: str, names: Sequence[str]) -> dict[str, Any]:
    try:
        return read_object(obj, names)
    except NotAnObjectError as error:
        raise ReceiptFormatError(f"{what} must be a JSON object, not {error.found}") from None
    except MembersError as error:
        raise ReceiptFormatError(f"{what}: {error}") from None


def _typed(obj: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ReceiptFormatError(f"{what}: {name} must be {kind.__name__}, not {json_type(value)}")
    return value


def _entry(item: object, position: int) -> ReceiptEntry:
    what = f"entries[{position}]"
    entry = _members(item, what, _ENTRY_MEMBERS)
    index = _typed(entry, "index", int, what)
    text = _typed(entry, "entry", str, what)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ReceiptFormatError(f"{what}: entry is not valid Unicode text") from None
    return ReceiptEntry(index, data, _hashes(_typed(entry, "inclusion_proof", list, what), what))


def _consistency(obj: object) -> Consistency:
    consistency = _members(obj, "consistency", _CONSISTENCY_MEMBERS)
    return Consistency(
        _typed(consistency, "first_size", int, "consistency"),
        _hashes(_typed(consistency, "proof", list, "consistency"), "consistency"),
    )


def _hashes(items: list[Any], what: str) -> tuple[bytes, ...]:
    if len(items) > MAX_PROOF_HASHES:
        raise ReceiptFormatError(f"{what}: a proof of {len(items)} hashes is too long")
    hashes = []
    for item in items:
        # A full match: bytes.fromhex alone would skip white space inside the string.
        if not is_hash_hex(item):
            raise ReceiptFormatError(f"{what}: a proof hash must be 64 lower-case hex digits")
        hashes.append(bytes.fromhex(item))
    return tuple(hashes)
