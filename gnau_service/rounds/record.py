"""A round's record: its state and public facts, as the rounds table keeps them (JSON text).

The record never holds the server seed: the table keeps it in a column of its own, and
:mod:`~gnau_service.rounds.view` shows it only once it is public.

Each step reads back the text the step before it wrote, so the records written lately are kept
by their text (:func:`record_text`, :func:`parsed_record`).

**Log indices.** A record names its events in the log by log index, or by pending id before
that. A step commits before its event has a log index, so a round record written by a step
names that event by its pending id, as the negative number ``-id`` in ``log_indices``
(:func:`pending_ids`). Every answer, and every read of a round, shows log indices only: an
answer once the step's events are integrated (:func:`with_indices`), a read with the events
the sequencer has not integrated yet left out (:func:`published_indices`; their step's caller
has not been answered either). A later step writes the indices it found integrated meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final

from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.round_events import VoidReason
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.reveal import beacon_to_json, read_beacon, read_seat, seat_to_json
from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.store import PendingEntry
from gnau_service.store.round_rows import StoredRound


class RoundState(StrEnum):
    SHUFFLED = "SHUFFLED"
    DEALT = "DEALT"
    REVEALED = "REVEALED"
    SETTLED = "SETTLED"
    VOIDED = "VOIDED"


OPEN_STATES: Final = frozenset({RoundState.SHUFFLED, RoundState.DEALT, RoundState.REVEALED})
SEED_IS_PUBLIC: Final = frozenset({RoundState.REVEALED, RoundState.SETTLED, RoundState.VOIDED})
#: The open states in which the outcome is known: a void pays from them.
DEALT_STATES: Final = frozenset({RoundState.DEALT, RoundState.REVEALED})


@dataclass(frozen=True)
class RoundRecord:
    """The public state of a round, as the rounds table keeps it. The seed is kept apart."""

    round_id: str
    table_id: str
    state: RoundState
    rules: HouseRules
    commitment: bytes
    key_id: str
    created_at: str
    updated_at: str
    #: Whose round it is (:mod:`gnau_service.audit.operators`); a record from before operators
    #: names none, and is :data:`~gnau_service.audit.operators.DEFAULT_OPERATOR`'s.
    operator: str
    seats: tuple[LockedSeat, ...] = ()
    beacon: Beacon | None = None
    transcript_hash: bytes | None = None
    void_reason: str | None = None
    log_indices: tuple[int, ...] = ()
    #: The rule set's figures as disclosed at the shuffle (None for rounds from before).
    return_to_player: ReturnToPlayer | None = None
    #: The round's fairness format; a record without one is a v1 round's.
    version: FairnessVersion = FairnessVersion.V1
    #: Why it was voided (None before reason codes, and for rounds not voided).
    void_reason_code: VoidReason | None = None
    #: The state it was voided in: a void after the deal pays (:func:`settle_interrupted
    #: <gnau_service.rules.settlement.settle_interrupted>`); None if not voided, or voided
    #: before the record kept it.
    voided_in: RoundState | None = None
    #: Who settled or voided it (the actor of its last entry) and when; None while open.
    completed_by: str | None = None
    completed_at: str | None = None
    #: When the service completes it if nobody else does; None once final
    #: (:mod:`~gnau_service.rounds.deadlines`).
    due_at: str | None = None
    #: Whether the round's entries name its operator: not those of a round shuffled before
    #: operators, whose later entries name none either, since replay wants every entry of a
    #: round to agree (such a record names no operator either).
    operator_logged: bool = True
    #: The catalogue version of its table it is played under, and the currency of its stakes
    #: (:mod:`~gnau_service.rounds.catalogue`); None for a round from before the catalogue.
    table_version: int | None = None
    currency: Currency | None = None

    def to_json(self) -> str:
        operator: dict[str, object] = {"operator": self.operator} if self.operator_logged else {}
        if self.table_version is not None and self.currency is not None:
            operator |= {"table_version": self.table_version, "currency": self.currency.to_json()}
        return json.dumps(
            {
                "round_id": self.round_id,
                **operator,
                "table_id": self.table_id,
                "state": str(self.state),
                "house_rules": self.rules.as_dict(),
                "commitment": self.commitment.hex(),
                "key_id": self.key_id,
                "created_at": self.created_at,
                "updated_at": self.updated_at,
                "seats": [seat_to_json(seat, self.version) for seat in self.seats],
                "beacon": None if self.beacon is None else beacon_to_json(self.beacon),
                "transcript_hash": None
                if self.transcript_hash is None
                else self.transcript_hash.hex(),
                "void_reason": self.void_reason,
                "log_indices": list(self.log_indices),
                "return_to_player": None
                if self.return_to_player is None
                else self.return_to_player.to_json(),
                "fairness_version": int(self.version),
                "void_reason_code": None
                if self.void_reason_code is None
                else str(self.void_reason_code),
                "voided_in": None if self.voided_in is None else str(self.voided_in),
                "completed_by": self.completed_by,
                "completed_at": self.completed_at,
                "due_at": self.due_at,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> RoundRecord:
        obj: dict[str, Any] = json.loads(text)
        version = FairnessVersion(obj.get("fairness_version", FairnessVersion.V1))
        return cls(
            round_id=obj["round_id"],
            table_id=obj["table_id"],
            state=RoundState(obj["state"]),
            rules=HouseRules.from_mapping(obj["house_rules"]),
            commitment=bytes.fromhex(obj["commitment"]),
            key_id=obj["key_id"],
            created_at=obj["created_at"],
            updated_at=obj["updated_at"],
            operator=obj.get("operator", DEFAULT_OPERATOR),
            seats=tuple(read_seat(seat, "seats", version) for seat in obj["seats"]),
            beacon=None if obj["beacon"] is None else read_beacon(obj["beacon"]),
            transcript_hash=(
                None if obj["transcript_hash"] is None else bytes.fromhex(obj["transcript_hash"])
            ),
            void_reason=obj["void_reason"],
            log_indices=tuple(obj["log_indices"]),
            return_to_player=None
            if obj.get("return_to_player") is None
            else ReturnToPlayer.from_json(obj["return_to_player"]),
            version=version,
            void_reason_code=None
            if obj.get("void_reason_code") is None
            else VoidReason(obj["void_reason_code"]),
            voided_in=None if obj.get("voided_in") is None else RoundState(obj["voided_in"]),
            completed_by=obj.get("completed_by"),
            completed_at=obj.get("completed_at"),
            due_at=obj.get("due_at"),
            operator_logged="operator" in obj,
            table_version=obj.get("table_version"),
            currency=None if obj.get("currency") is None else Currency.from_json(obj["currency"]),
        )

    @property
    def voided_after_deal(self) -> bool:
        """Whether it was voided with its outcome known, and so pays each seat the better of
        its result and a refund."""
        return self.state is RoundState.VOIDED and self.voided_in in DEALT_STATES


def stored_round(record: RoundRecord, seed: bytes, text: str) -> StoredRound:
    """The row of a new round: ``record`` as its JSON ``text``, and its seed."""
    return StoredRound(
        round_id=record.round_id,
        operator=record.operator,
        table_id=record.table_id,
        state=str(record.state),
        record=text,
        server_seed=seed.hex(),
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


#: Round records by the JSON text they were written as. Each step reads back the text the step
#: before it wrote, and parsing and validating that again cost more than the step's SQL. Keyed by
#: the whole text, so it cannot go stale; cleared when full.
_RECORDS_BY_TEXT: dict[str, RoundRecord] = {}
_MAX_RECORDS_BY_TEXT: Final = 4096


def record_text(record: RoundRecord) -> str:
    """``record`` as the JSON text to store, remembered for :func:`parsed_record`."""
    text = record.to_json()
    if len(_RECORDS_BY_TEXT) >= _MAX_RECORDS_BY_TEXT:
        _RECORDS_BY_TEXT.clear()
    _RECORDS_BY_TEXT[text] = record
    return text


def parsed_record(text: str) -> RoundRecord:
    """The record stored as ``text``."""
    return _RECORDS_BY_TEXT.get(text) or RoundRecord.from_json(text)


# -- log indices (see the module's text) ---------------------------------------------------------


def pending_ids(record: RoundRecord) -> list[int]:
    """The pending ids of the record's events that had no log index when it was written."""
    return [-index for index in record.log_indices if index < 0]


def named_indices(log_indices: tuple[int, ...], entries: Sequence[PendingEntry]) -> tuple[int, ...]:
    """``log_indices`` with each pending event among ``entries`` that has an index named by it.

    >>> named_indices((4, -17, -18), [PendingEntry(17, index=9), PendingEntry(18)])
    (4, 9, -18)
    """
    known = {entry.id: entry.index for entry in entries if entry.index >= 0}
    return tuple(known.get(-index, index) if index < 0 else index for index in log_indices)


def with_indices(record: RoundRecord, entries: Sequence[PendingEntry]) -> RoundRecord:
    """``record`` with each event among ``entries`` that has an index named by it."""
    if not entries or not pending_ids(record):
        return record
    return replace(record, log_indices=named_indices(record.log_indices, entries))


def published_indices(log_indices: tuple[int, ...], known: Mapping[int, int]) -> tuple[int, ...]:
    """``log_indices`` as a read shows them, given the log indices ``known`` by pending id:
    each pending event named by its index, or left out if it has none yet.

    >>> published_indices((4, -17, -18), {17: 9})
    (4, 9)
    """
    return tuple(
        known[-index] if index < 0 else index
        for index in log_indices
        if index >= 0 or -index in known
    )
