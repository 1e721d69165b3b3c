"""The dealer's round lifecycle, free of any transport.

``SHUFFLED → DEALT → REVEALED → SETTLED``, or ``VOIDED`` by an explicit (logged) operator call
before settlement. Every change is one unit of work in the store (a step): the round row, its
audit event and the request record commit together or not at all, so after a crash a round is
in its previous state or its next one with its event durable, never half-way; the step's caller
is answered once the sequencer has made the event a signed log entry.

A step commits before its event has a log index, so a round record written by a step names
that event by its pending id, as the negative number ``-id`` in ``log_indices`` (see
:func:`with_indices`); every answer, and every read of a round, shows log indices only. A later
step writes the indices it found integrated meanwhile.

Every mutation carries an :class:`Idempotency` key. A retry with the same request id and body
gets the original answer and writes nothing; the same id with another body is refused. The
answer is a :class:`RoundView`: what the round shows the world at that moment, which never holds
the server seed before the round is revealed (or voided).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.round_events import (
    committed_payload,
    dealt_payload,
    revealed_payload,
    settle_round,
    settled_payload,
    voided_payload,
)
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.fairness.deal import SeatHand, max_seats
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.reveal import (
    RevealedRound,
    beacon_to_json,
    read_beacon,
    read_seat,
    seat_to_json,
)
from gnau_service.fairness.round import CommittedRound, DealtRound
from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rules.cards import Card
from gnau_service.rules.errors import quoted
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import Settlement, largest_payout
from gnau_service.server.limits import (
    DEFAULT_MAX_STAKE,
    DEFAULT_PAGE_SIZE,
    MAX_JSON_INTEGER,
    MAX_PAGE_SIZE,
    MAX_PAGE_TOKEN_CHARS,
    MAX_ROUND_ID_BYTES,
    MAX_TABLE_ID_BYTES,
    MAX_VOID_REASON_BYTES,
)
from gnau_service.store import PendingEntry, Store, Transaction
from gnau_service.store.rounds import (
    OpenRoundExists,
    StoredRequest,
    StoredRound,
    find_request,
    find_request_and_round,
    insert_round,
    list_rounds,
    load_round,
    read_round,
    save_request,
    update_round,
)


class RoundState(StrEnum):
    SHUFFLED = "SHUFFLED"
    DEALT = "DEALT"
    REVEALED = "REVEALED"
    SETTLED = "SETTLED"
    VOIDED = "VOIDED"


OPEN_STATES: Final = frozenset({RoundState.SHUFFLED, RoundState.DEALT, RoundState.REVEALED})
SEED_IS_PUBLIC: Final = frozenset({RoundState.REVEALED, RoundState.SETTLED, RoundState.VOIDED})


# -- errors: each names what is wrong ---------------------------------------------------------


class DealerError(Exception):
    """A request the dealer refuses; nothing was changed or logged."""


class RoundNotFound(DealerError):  # noqa: N818
    def __init__(self, round_id: str) -> None:
        super().__init__(f"there is no round {quoted(round_id)}")
        self.round_id = round_id


class WrongState(DealerError):  # noqa: N818
    def __init__(self, round_id: str, state: RoundState, operation: str) -> None:
        super().__init__(f"round {round_id} is {state}; {operation} is not allowed in that state")
        self.round_id, self.state, self.operation = round_id, state, operation


class TableBusy(DealerError):  # noqa: N818
    def __init__(self, table_id: str, round_id: str, state: str) -> None:
        super().__init__(
            f"table {quoted(table_id)} already has an unfinished round {round_id} ({state}); "
            "settle or void it first"
        )
        self.table_id, self.round_id, self.state = table_id, round_id, state


class RequestConflict(DealerError):  # noqa: N818
    def __init__(self, request_id: str, operation: str) -> None:
        super().__init__(
            f"request id {quoted(request_id)} was already used by another request ({operation}); "
            "a retry must repeat the same request exactly"
        )
        self.request_id = request_id


class OutOfRange(DealerError):  # noqa: N818
    """An index or size beyond the log."""


class InvalidRequest(DealerError):  # noqa: N818
    """Bad fields; ``violations`` pairs each field path with what is wrong with it."""

    def __init__(self, violations: Sequence[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {problem}" for path, problem in violations))
        self.violations = tuple(violations)


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Idempotency:
    """A client's request id and a fingerprint of the rest of its request body."""

    request_id: str
    fingerprint: str


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
    seats: tuple[LockedSeat, ...] = ()
    beacon: Beacon | None = None
    transcript_hash: bytes | None = None
    void_reason: str | None = None
    log_indices: tuple[int, ...] = ()
    #: The rule set's figures as disclosed at the shuffle (None for rounds from before).
    return_to_player: ReturnToPlayer | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "round_id": self.round_id,
                "table_id": self.table_id,
                "state": str(self.state),
                "house_rules": self.rules.as_dict(),
                "commitment": self.commitment.hex(),
                "key_id": self.key_id,
                "created_at": self.created_at,
                "updated_at": self.updated_at,
                "seats": [seat_to_json(seat) for seat in self.seats],
                "beacon": None if self.beacon is None else beacon_to_json(self.beacon),
                "transcript_hash": None
                if self.transcript_hash is None
                else self.transcript_hash.hex(),
                "void_reason": self.void_reason,
                "log_indices": list(self.log_indices),
                "return_to_player": None
                if self.return_to_player is None
                else self.return_to_player.to_json(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> RoundRecord:
        obj: dict[str, Any] = json.loads(text)
        return cls(
            round_id=obj["round_id"],
            table_id=obj["table_id"],
            state=RoundState(obj["state"]),
            rules=HouseRules.from_mapping(obj["house_rules"]),
            commitment=bytes.fromhex(obj["commitment"]),
            key_id=obj["key_id"],
            created_at=obj["created_at"],
            updated_at=obj["updated_at"],
            seats=tuple(read_seat(seat, "seats") for seat in obj["seats"]),
            beacon=None if obj["beacon"] is None else read_beacon(obj["beacon"]),
            transcript_hash=(
                None if obj["transcript_hash"] is None else bytes.fromhex(obj["transcript_hash"])
            ),
            void_reason=obj["void_reason"],
            log_indices=tuple(obj["log_indices"]),
            return_to_player=None
            if obj.get("return_to_player") is None
            else ReturnToPlayer.from_json(obj["return_to_player"]),
        )


@dataclass(frozen=True)
class RoundView:
    """What a round shows the world at one moment: hands once dealt, the seed and deck once
    revealed (or voided), the settlement once settled."""

    record: RoundRecord
    hands: tuple[SeatHand, ...] = ()
    dealer_hand: tuple[Card, ...] = ()
    server_seed: bytes | None = None
    deck: tuple[Card, ...] = ()
    settlement: Settlement | None = None


def view_of(record: RoundRecord, seed: bytes, settlement: Settlement | None = None) -> RoundView:
    """The public view of ``record``; ``seed`` is used, and shown only once it is public."""
    public_seed = seed if record.state in SEED_IS_PUBLIC else None
    if not record.seats:
        return RoundView(record, server_seed=public_seed)
    dealt = _dealt(record, seed)
    if settlement is None and record.state is RoundState.SETTLED:
        settlement = settle_round(dealt.reveal())
    return RoundView(
        record,
        hands=dealt.deal.seat_hands,
        dealer_hand=dealt.deal.dealer_hand,
        server_seed=public_seed,
        deck=dealt.deck if public_seed is not None else (),
        settlement=settlement,
    )


def revealed_round(view: RoundView) -> RevealedRound | None:
    """The round in the verifiable form of docs/fairness.md, once its seed is public; None if
    it is not, or was never dealt."""
    if view.server_seed is None or not view.record.seats:
        return None
    return _dealt(view.record, view.server_seed).reveal()


def _dealt(record: RoundRecord, seed: bytes) -> DealtRound:
    return _deal(record.round_id, record.rules, seed, record.seats, record.beacon)


@functools.lru_cache(maxsize=4096)
def _deal(
    round_id: str,
    rules: HouseRules,
    seed: bytes,
    seats: tuple[LockedSeat, ...],
    beacon: Beacon | None,
) -> DealtRound:
    """The deal is a pure function of these, needed at every later step and answer of the
    round: derive it once (the shuffle is most of a step's work), keep the recent ones."""
    return CommittedRound(round_id, rules, seed).lock(seats, beacon).deal()


# -- the dealer ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeatRequest:
    """A seat as a client asks for it, before validation."""

    seat_number: int
    player_id: str
    stake: int
    client_seed: bytes = b""


@dataclass
class Dealer:
    """Runs rounds on tables, one unit of work per change."""

    store: Store
    max_stake: int = DEFAULT_MAX_STAKE
    _ids: Any = field(default=secrets.token_hex, repr=False)

    async def shuffle(
        self,
        table_id: str,
        rules: HouseRules,
        idempotency: Idempotency,
        disclosed: ReturnToPlayer | None = None,
    ) -> RoundView:
        """Start a round. ``disclosed``, the rule set's figures, goes into its log entry and
        record (the service always gives it; see :mod:`gnau_service.server.disclosure`)."""
        check_table_id(table_id)

        def unit(tx: Transaction) -> Answer:
            request = find_request(tx, idempotency.request_id)
            if request is not None:
                return _replay(tx, idempotency, "Shuffle", request)
            committed = CommittedRound.with_fresh_seed(f"r-{self._ids(12)}", rules)
            entry = tx.append(
                EntryKind.ROUND_COMMITTED,
                committed_payload(committed, table_id, disclosed),
                round_id=committed.round_id,
            )
            record = RoundRecord(
                round_id=committed.round_id,
                table_id=table_id,
                state=RoundState.SHUFFLED,
                rules=rules,
                commitment=committed.commitment,
                key_id=self.store.signer.key_id.hex(),
                created_at=tx.time,
                updated_at=tx.time,
                log_indices=(-entry.id,),
                return_to_player=disclosed,
            )
            text = _written(record)
            try:
                insert_round(tx, _stored(record, committed.server_seed, text))
            except OpenRoundExists as busy:
                raise TableBusy(table_id, *busy.args) from None
            view = _answer(tx, idempotency, "Shuffle", record, committed.server_seed, text=text)
            return view, tx.appended

        return _resolved(*await self.store.run_async(unit))

    async def deal(
        self,
        round_id: str,
        seats: Sequence[SeatRequest],
        beacon: tuple[str, bytes] | None,
        idempotency: Idempotency,
    ) -> RoundView:
        def to_dealt(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            locked, locked_beacon = self._lock(record.rules, seats, beacon)
            dealt = _deal(round_id, record.rules, seed, locked, locked_beacon)
            entry = tx.append(EntryKind.ROUND_DEALT, dealt_payload(dealt), round_id=round_id)
            record = replace(
                record,
                state=RoundState.DEALT,
                seats=dealt.locked.seats,
                beacon=locked_beacon,
                transcript_hash=dealt.locked.transcript_hash,
                updated_at=tx.time,
                log_indices=(*record.log_indices, -entry.id),
            )
            return _save(tx, idempotency, "Deal", record, seed)

        return await self._step(round_id, idempotency, "Deal", (RoundState.SHUFFLED,), to_dealt)

    async def reveal(self, round_id: str, idempotency: Idempotency) -> RoundView:
        def to_revealed(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            entry = tx.append(
                EntryKind.ROUND_REVEALED, revealed_payload(_dealt(record, seed)), round_id=round_id
            )
            record = _advance(record, RoundState.REVEALED, tx.time, entry)
            return _save(tx, idempotency, "Reveal", record, seed)

        return await self._step(round_id, idempotency, "Reveal", (RoundState.DEALT,), to_revealed)

    async def settle(self, round_id: str, idempotency: Idempotency) -> RoundView:
        def to_settled(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            settlement = settle_round(_dealt(record, seed).reveal())
            entry = tx.append(
                EntryKind.ROUND_SETTLED, settled_payload(settlement), round_id=round_id
            )
            record = _advance(record, RoundState.SETTLED, tx.time, entry)
            return _save(tx, idempotency, "Settle", record, seed, settlement=settlement)

        return await self._step(round_id, idempotency, "Settle", (RoundState.REVEALED,), to_settled)

    async def void(self, round_id: str, reason: str, idempotency: Idempotency) -> RoundView:
        if not reason.strip() or len(reason.encode()) > MAX_VOID_REASON_BYTES:
            raise InvalidRequest(
                [("reason", f"must be 1 to {MAX_VOID_REASON_BYTES} bytes of UTF-8 saying why")]
            )

        def to_voided(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            committed = CommittedRound(round_id, record.rules, seed)
            entry = tx.append(
                EntryKind.ROUND_VOIDED,
                voided_payload(committed, reason, str(record.state)),
                round_id=round_id,
            )
            record = replace(
                _advance(record, RoundState.VOIDED, tx.time, entry), void_reason=reason
            )
            return _save(tx, idempotency, "VoidRound", record, seed)

        return await self._step(round_id, idempotency, "VoidRound", OPEN_STATES, to_voided)

    async def _step(
        self,
        round_id: str,
        idempotency: Idempotency,
        operation: str,
        allowed: Collection[RoundState],
        advance: Callable[[Transaction, RoundRecord, bytes], RoundView],
    ) -> RoundView:
        """One step of an existing round, as a unit of work: the original answer if the request
        is a retry, else ``advance`` applied to the round and its seed, refused unless the round
        is in one of the ``allowed`` states."""
        check_round_id(round_id)

        def unit(tx: Transaction) -> Answer:
            request, stored = find_request_and_round(tx, idempotency.request_id, round_id)
            if request is not None:
                return _replay(tx, idempotency, operation, request)
            if stored is None:
                raise RoundNotFound(round_id)
            record = _parsed(stored.record)
            if record.state not in allowed:
                raise WrongState(round_id, record.state, operation)
            earlier = tx.refer(pending_ids(record))
            view = advance(tx, with_indices(record, earlier), bytes.fromhex(stored.server_seed))
            return view, [*earlier, *tx.appended]

        return _resolved(*await self.store.run_async(unit))

    def get(self, round_id: str, *, public: bool = False) -> RoundView:
        """The round as it stands; to the ``public``, a round whose seed is not public yet does
        not exist: say nothing about it."""
        check_round_id(round_id)
        stored = read_round(self.store, round_id)
        if stored is None or (public and RoundState(stored.state) not in SEED_IS_PUBLIC):
            raise RoundNotFound(round_id)
        (record,) = self._published([_parsed(stored.record)])
        return view_of(record, bytes.fromhex(stored.server_seed))

    def list(
        self, table_id: str, page_size: int, page_token: str, *, public: bool = False
    ) -> tuple[list[RoundView], str]:
        """The rounds of a table (every table's if ``table_id`` is empty), newest first, and the
        token of the next page ("" at the end); only rounds whose seed is public if ``public``
        (to the public, no other round exists yet)."""
        if table_id:
            check_table_id(table_id)
        if page_size < 0:
            raise InvalidRequest([("page_size", "must not be negative")])
        limit = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        after = _read_page_token(page_token, table_id) if page_token else None
        states = {str(state) for state in SEED_IS_PUBLIC} if public else None
        rows = list_rounds(self.store, table_id or None, limit + 1, after, states=states)
        records = self._published([_parsed(row.record) for row in rows[:limit]])
        views = [
            view_of(record, bytes.fromhex(row.server_seed))
            for record, row in zip(records, rows, strict=False)
        ]
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = _page_token(table_id, last.created_at, last.round_id)
        return views, next_token

    def _published(self, records: Sequence[RoundRecord]) -> tuple[RoundRecord, ...]:
        """Records as a read shows them: log indices only, an event the sequencer has not
        integrated yet left out (its step's caller has not been answered either)."""
        awaited = [pending_id for record in records for pending_id in pending_ids(record)]
        known = self.store.pending_indices(awaited) if awaited else {}
        return tuple(
            replace(
                record,
                log_indices=tuple(
                    known[-index] if index < 0 else index
                    for index in record.log_indices
                    if index >= 0 or -index in known
                ),
            )
            if pending_ids(record)
            else record
            for record in records
        )

    def _lock(
        self,
        rules: HouseRules,
        seats: Sequence[SeatRequest],
        beacon: tuple[str, bytes] | None,
    ) -> tuple[tuple[LockedSeat, ...], Beacon | None]:
        """Validate every seat and the beacon, reporting every bad field at once."""
        violations: list[tuple[str, str]] = []
        most = max_seats(rules.decks)
        if not seats:
            violations.append(("seats", "a round needs at least one seat"))
        if len(seats) > most:
            violations.append(
                ("seats", f"{len(seats)} seats, but {rules.decks} deck(s) deal at most {most}")
            )
        locked: list[LockedSeat] = []
        seen: set[int] = set()
        payout = largest_payout(rules)
        for i, seat in enumerate(seats):
            path = f"seats[{i}]"
            # LockedSeat checks each field's range (seat numbers 1 to 2^31-1, gaps allowed).
            if seat.seat_number in seen:
                violations.append((f"{path}.seat_number", f"seat {seat.seat_number} is repeated"))
            seen.add(seat.seat_number)
            if not 1 <= seat.stake <= self.max_stake:
                violations.append(
                    (f"{path}.stake", f"must be from 1 to {self.max_stake:,}, got {seat.stake}")
                )
                continue
            if seat.stake * payout > MAX_JSON_INTEGER:
                violations.append(
                    (
                        f"{path}.stake",
                        f"{seat.stake:,} x the largest payout ({payout}) exceeds 2^53-1, "
                        "the most the audit log can hold",
                    )
                )
                continue
            try:
                locked.append(
                    LockedSeat(seat.seat_number, seat.player_id, seat.stake, seat.client_seed)
                )
            except FairnessError as error:
                violations.append((f"{path}.{error.field}", str(error)))
        exposure = sum(seat.stake for seat in locked) * payout
        if exposure > MAX_JSON_INTEGER and len(locked) == len(seats):
            violations.append(
                (
                    "seats",
                    f"the stakes sum to {exposure // payout:,}; x the largest payout ({payout}), "
                    "the dealer's result could exceed 2^53-1, the most the audit log can hold",
                )
            )
        locked_beacon = None
        if beacon is not None:
            try:
                locked_beacon = Beacon(*beacon)
            except FairnessError as error:
                violations.append((f"beacon.{error.field}", str(error)))
        if violations:
            raise InvalidRequest(violations)
        return tuple(locked), locked_beacon


# -- units of work: the shared steps ---------------------------------------------------------------


#: What a step's unit gives its caller: the answer, and the events whose log indices it awaits.
Answer = tuple[RoundView, list[PendingEntry]]


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


def _resolved(view: RoundView, entries: Sequence[PendingEntry]) -> RoundView:
    """The answer once its events are integrated (the store fills in their indices first)."""
    return replace(view, record=with_indices(view.record, entries))


def _replay(
    tx: Transaction, idempotency: Idempotency, operation: str, request: StoredRequest
) -> Answer:
    """The original answer to a retried request (refused if it is not the same request), once
    its events are integrated."""
    if (request.operation, request.fingerprint) != (operation, idempotency.fingerprint):
        raise RequestConflict(idempotency.request_id, request.operation)
    record = _parsed(request.response)
    current = load_round(tx, record.round_id)
    assert current is not None
    return view_of(record, bytes.fromhex(current.server_seed)), tx.refer(pending_ids(record))


def _advance(record: RoundRecord, state: RoundState, time: str, entry: PendingEntry) -> RoundRecord:
    return replace(
        record, state=state, updated_at=time, log_indices=(*record.log_indices, -entry.id)
    )


def _save(
    tx: Transaction,
    idempotency: Idempotency,
    operation: str,
    record: RoundRecord,
    seed: bytes,
    *,
    settlement: Settlement | None = None,
) -> RoundView:
    text = _written(record)
    update_round(tx, record.round_id, str(record.state), text, record.updated_at)
    return _answer(tx, idempotency, operation, record, seed, text=text, settlement=settlement)


def _answer(
    tx: Transaction,
    idempotency: Idempotency,
    operation: str,
    record: RoundRecord,
    seed: bytes,
    *,
    text: str,
    settlement: Settlement | None = None,
) -> RoundView:
    save_request(
        tx, StoredRequest(idempotency.request_id, operation, idempotency.fingerprint, text)
    )
    return view_of(record, seed, settlement)


def _stored(record: RoundRecord, seed: bytes, text: str) -> StoredRound:
    return StoredRound(
        round_id=record.round_id,
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


def _written(record: RoundRecord) -> str:
    """``record`` as the JSON text to store, remembered for :func:`_parsed`."""
    text = record.to_json()
    if len(_RECORDS_BY_TEXT) >= _MAX_RECORDS_BY_TEXT:
        _RECORDS_BY_TEXT.clear()
    _RECORDS_BY_TEXT[text] = record
    return text


def _parsed(text: str) -> RoundRecord:
    return _RECORDS_BY_TEXT.get(text) or RoundRecord.from_json(text)


def check_table_id(table_id: str) -> None:
    """A table id: 1 to 128 bytes of UTF-8, no control character, no space at either end."""
    if not _is_name(table_id, MAX_TABLE_ID_BYTES) or table_id != table_id.strip(" "):
        raise InvalidRequest(
            [
                (
                    "table_id",
                    f"must be 1 to {MAX_TABLE_ID_BYTES} bytes of UTF-8, with no control "
                    "character and no space at either end",
                )
            ]
        )


def check_round_id(round_id: str) -> None:
    """A round id a round could have: 1 to 128 bytes of UTF-8, no control character (a
    well-formed id of no round is NOT_FOUND, later)."""
    if not _is_name(round_id, MAX_ROUND_ID_BYTES):
        raise InvalidRequest(
            [
                (
                    "round_id",
                    f"must be 1 to {MAX_ROUND_ID_BYTES} bytes of UTF-8, with no control character",
                )
            ]
        )


def _is_name(text: str, max_bytes: int) -> bool:
    # No control character: NUL, in particular, no database text column can hold.
    return bool(text) and len(text.encode()) <= max_bytes and not _CONTROL.search(text)


#: C0 and C1 control characters and DEL.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")


def _page_token(table_id: str, created_at: str, round_id: str) -> str:
    # The table is inside, so a token is refused for another table (AIP-158).
    return base64.urlsafe_b64encode(json.dumps([table_id, created_at, round_id]).encode()).decode()


def _read_page_token(token: str, table_id: str) -> tuple[str, str]:
    try:
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise ValueError("too long")
        token_table, created_at, round_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not all(isinstance(value, str) for value in (token_table, created_at, round_id)):
            raise TypeError("not a token")
        parse_utc_timestamp(created_at)
        check_round_id(round_id)
    except (ValueError, TypeError, binascii.Error, InvalidRequest):
        raise InvalidRequest([("page_token", "is not a token this service returned")]) from None
    if token_table != table_id:
        raise InvalidRequest(
            [("page_token", "was returned for another table_id; page with the same table_id")]
        )
    return created_at, round_id
