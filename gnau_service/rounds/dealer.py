"""The dealer's round lifecycle, free of any transport.

``SHUFFLED → DEALT → REVEALED → SETTLED``, or ``VOIDED`` by an explicit (logged) operator call
before settlement. Every change is one unit of work in the store (a step): the round row, its
audit event and the request record commit together or not at all, so after a crash a round is
in its previous state or its next one with its event durable, never half-way; the step's caller
is answered once the sequencer has made the event a signed log entry (until then the record
names the event by its pending id: :mod:`~gnau_service.rounds.record`).

Every mutation carries an :class:`Idempotency` key. A retry with the same request id and body
gets the original answer and writes nothing; the same id with another body is refused. The
answer is a :class:`~gnau_service.rounds.view.RoundView`: what the round shows the world
at that moment, which never holds the server seed before the round is revealed (or voided).

The rest of the round service is in modules of their own: the refusals
(:mod:`~gnau_service.rounds.refusals`), the record (:mod:`~gnau_service.rounds.record`),
the view (:mod:`~gnau_service.rounds.view`), the checks of a request's fields
(:mod:`~gnau_service.rounds.requests`) and the pages of a listing
(:mod:`~gnau_service.rounds.paging`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.round_events import (
    committed_payload,
    dealt_payload,
    revealed_payload,
    settle_round,
    settled_payload,
    voided_payload,
)
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.round import CommittedRound
from gnau_service.rounds.identities import (
    deal_fingerprint,
    retried_names,
    seat_players,
    seat_references,
)
from gnau_service.rounds.limits import DEFAULT_MAX_STAKE
from gnau_service.rounds.paging import next_page_token, page_limit, read_page_token
from gnau_service.rounds.record import (
    OPEN_STATES,
    SEED_IS_PUBLIC,
    RoundRecord,
    RoundState,
    parsed_record,
    pending_ids,
    published_indices,
    record_text,
    stored_round,
    with_indices,
)
from gnau_service.rounds.refusals import RequestConflict, RoundNotFound, TableBusy, WrongState
from gnau_service.rounds.requests import (
    SeatRequest,
    check_round_id,
    check_table_id,
    check_void_reason,
    locked_seats,
)
from gnau_service.rounds.view import RoundView, dealt_round, dealt_round_of, view_of
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import Settlement
from gnau_service.store import PendingEntry, Store, Transaction
from gnau_service.store.round_rows import (
    OpenRoundExists,
    StoredRequest,
    claim_table,
    find_request,
    find_request_and_round,
    insert_round,
    list_rounds,
    load_round,
    read_round,
    save_request,
    update_round,
)


@dataclass(frozen=True)
class Idempotency:
    """A client's request id and a fingerprint of the rest of its request body."""

    request_id: str
    fingerprint: str


@dataclass
class Dealer:
    """Runs rounds on tables, one unit of work per change."""

    store: Store
    max_stake: int = DEFAULT_MAX_STAKE

    async def shuffle(
        self,
        table_id: str,
        rules: HouseRules,
        idempotency: Idempotency,
        *,
        deadline: float | None = None,
    ) -> RoundView:
        """Start a round. Its rule set's figures, looked up in the shipped table
        (:meth:`ReturnToPlayer.of_rules`, never computed here), go into its log entry and record.
        ``deadline``, here and in every step: the call's, as :meth:`Store.run_async
        <gnau_service.store.store.Store.run_async>` takes it."""
        check_table_id(table_id)

        def unit(tx: Transaction) -> Answer:
            request = find_request(tx, idempotency.request_id)
            if request is not None:
                return _replay(tx, idempotency, "Shuffle", request)
            # The table first, its event after: the previous round's last event must have
            # committed before this one takes its place in the outbox (see claim_table).
            try:
                claim_table(tx, table_id)
            except OpenRoundExists as busy:
                raise TableBusy(table_id, *busy.args) from None
            # A v2 round: its seats will name their players by reference (docs/privacy.md).
            committed = CommittedRound.with_fresh_seed(f"r-{secrets.token_hex(12)}", rules)
            disclosed = ReturnToPlayer.of_rules(rules)
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
                version=committed.version,
            )
            text = record_text(record)
            insert_round(tx, stored_round(record, committed.server_seed, text))
            view = _answer(tx, idempotency, "Shuffle", record, committed.server_seed, text=text)
            return view, tx.appended

        return _resolved(*await self.store.run_async(unit, deadline=deadline))

    async def deal(
        self,
        round_id: str,
        seats: Sequence[SeatRequest],
        beacon: tuple[str, bytes] | None,
        idempotency: Idempotency,
        *,
        deadline: float | None = None,
    ) -> RoundView:
        # The request record keeps a fingerprint of what the log publishes, never of a player
        # id: ``idempotency.fingerprint`` is of the body without them (see deal_fingerprint).
        asked = [(seat.seat_number, seat.player_id) for seat in seats]

        def retried(tx: Transaction, record: RoundRecord) -> Idempotency:
            names = retried_names(tx, record, asked)
            return replace(
                idempotency, fingerprint=deal_fingerprint(idempotency.fingerprint, names)
            )

        def to_dealt(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            locked, locked_beacon = locked_seats(record.rules, seats, beacon, self.max_stake)
            # The answer names each seat's player: known here, so not read back.
            players: dict[str, str] = {}
            if record.version is not FairnessVersion.V1:
                # Before anything is logged or answered: the seats name their players by
                # reference (outside the shuffle's input, so a key made now moves no card).
                by_id, locked = locked, seat_references(tx, round_id, locked)
                players = {
                    named.player: seat.player for named, seat in zip(locked, by_id, strict=True)
                }
            names = [(seat.seat_number, seat.player) for seat in locked]
            keyed = replace(
                idempotency, fingerprint=deal_fingerprint(idempotency.fingerprint, names)
            )
            dealt = dealt_round(round_id, record.rules, seed, locked, locked_beacon, record.version)
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
            return _save(tx, keyed, "Deal", record, seed, players=players)

        return await self._step(
            round_id,
            idempotency,
            "Deal",
            (RoundState.SHUFFLED,),
            to_dealt,
            retried=retried,
            deadline=deadline,
        )

    async def reveal(
        self, round_id: str, idempotency: Idempotency, *, deadline: float | None = None
    ) -> RoundView:
        def to_revealed(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            entry = tx.append(
                EntryKind.ROUND_REVEALED,
                revealed_payload(dealt_round_of(record, seed)),
                round_id=round_id,
            )
            record = _advance(record, RoundState.REVEALED, tx.time, entry)
            return _save(tx, idempotency, "Reveal", record, seed)

        return await self._step(
            round_id, idempotency, "Reveal", (RoundState.DEALT,), to_revealed, deadline=deadline
        )

    async def settle(
        self, round_id: str, idempotency: Idempotency, *, deadline: float | None = None
    ) -> RoundView:
        def to_settled(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            settlement = settle_round(dealt_round_of(record, seed).reveal())
            entry = tx.append(
                EntryKind.ROUND_SETTLED, settled_payload(settlement), round_id=round_id
            )
            record = _advance(record, RoundState.SETTLED, tx.time, entry)
            return _save(tx, idempotency, "Settle", record, seed, settlement=settlement)

        return await self._step(
            round_id, idempotency, "Settle", (RoundState.REVEALED,), to_settled, deadline=deadline
        )

    async def void(
        self, round_id: str, reason: str, idempotency: Idempotency, *, deadline: float | None = None
    ) -> RoundView:
        check_void_reason(reason)

        def to_voided(tx: Transaction, record: RoundRecord, seed: bytes) -> RoundView:
            committed = CommittedRound(round_id, record.rules, seed, record.version)
            entry = tx.append(
                EntryKind.ROUND_VOIDED,
                voided_payload(committed, reason, str(record.state)),
                round_id=round_id,
            )
            record = replace(
                _advance(record, RoundState.VOIDED, tx.time, entry), void_reason=reason
            )
            return _save(tx, idempotency, "VoidRound", record, seed)

        return await self._step(
            round_id, idempotency, "VoidRound", OPEN_STATES, to_voided, deadline=deadline
        )

    async def _step(
        self,
        round_id: str,
        idempotency: Idempotency,
        operation: str,
        allowed: Collection[RoundState],
        advance: Callable[[Transaction, RoundRecord, bytes], RoundView],
        *,
        retried: Callable[[Transaction, RoundRecord], Idempotency] | None = None,
        deadline: float | None = None,
    ) -> RoundView:
        """One step of an existing round, as a unit of work: the original answer if the request
        is a retry, else ``advance`` applied to the round and its seed, refused unless the round
        is in one of the ``allowed`` states. ``retried``: the idempotency a retry is matched
        with, given the round (by default ``idempotency`` itself)."""
        check_round_id(round_id)

        def unit(tx: Transaction) -> Answer:
            request, stored = find_request_and_round(tx, idempotency.request_id, round_id)
            if request is not None:
                matched = idempotency
                if retried is not None and stored is not None:
                    matched = retried(tx, parsed_record(stored.record))
                return _replay(tx, matched, operation, request)
            if stored is None:
                raise RoundNotFound(round_id)
            record = parsed_record(stored.record)
            if record.state not in allowed:
                raise WrongState(round_id, record.state, operation)
            earlier = tx.refer(pending_ids(record))
            view = advance(tx, with_indices(record, earlier), bytes.fromhex(stored.server_seed))
            return view, [*earlier, *tx.appended]

        return _resolved(*await self.store.run_async(unit, deadline=deadline))

    def get(self, round_id: str, *, public: bool = False) -> RoundView:
        """The round as it stands; to the ``public``, a round whose seed is not public yet does
        not exist: say nothing about it. Blocking: call it from a thread."""
        check_round_id(round_id)
        stored = read_round(self.store, round_id)
        if stored is None or (public and RoundState(stored.state) not in SEED_IS_PUBLIC):
            raise RoundNotFound(round_id, public=public)
        (record,) = self._published([parsed_record(stored.record)])
        # The public is never told who sits where; the operator and the auditor are.
        players = {} if public else seat_players(self.store, [record])
        return view_of(record, bytes.fromhex(stored.server_seed), players=players)

    def list(
        self, table_id: str, page_size: int, page_token: str, *, public: bool = False
    ) -> tuple[list[RoundView], str]:
        """The rounds of a table (every table's if ``table_id`` is empty), newest first, and the
        token of the next page ("" at the end); only rounds whose seed is public if ``public``
        (to the public, no other round exists yet). Blocking: call it from a thread."""
        if table_id:
            check_table_id(table_id)
        limit = page_limit(page_size)
        after = read_page_token(page_token, table_id) if page_token else None
        states = {str(state) for state in SEED_IS_PUBLIC} if public else None
        rows = list_rounds(self.store, table_id or None, limit + 1, after, states=states)
        records = self._published([parsed_record(row.record) for row in rows[:limit]])
        players = {} if public else seat_players(self.store, records)  # one query for the page
        views = [
            view_of(record, bytes.fromhex(row.server_seed), players=players)
            for record, row in zip(records, rows, strict=False)
        ]
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = next_page_token(table_id, last.created_at, last.round_id)
        return views, next_token

    def _published(self, records: Sequence[RoundRecord]) -> tuple[RoundRecord, ...]:
        """Records as a read shows them: log indices only, an event the sequencer has not
        integrated yet left out (its step's caller has not been answered either)."""
        awaited = [pending_id for record in records for pending_id in pending_ids(record)]
        if not awaited:
            return tuple(records)
        known = self.store.pending_indices(awaited)
        return tuple(
            replace(record, log_indices=published_indices(record.log_indices, known))
            if pending_ids(record)
            else record
            for record in records
        )


# -- units of work: the shared steps ---------------------------------------------------------------


#: What a step's unit gives its caller: the answer, and the events whose log indices it awaits.
Answer = tuple[RoundView, list[PendingEntry]]


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
    record = parsed_record(request.response)
    current = load_round(tx, record.round_id)
    assert current is not None
    players = seat_players(tx, [record])
    view = view_of(record, bytes.fromhex(current.server_seed), players=players)
    return view, tx.refer(pending_ids(record))


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
    players: Mapping[str, str] | None = None,
) -> RoundView:
    text = record_text(record)
    update_round(tx, record.round_id, str(record.state), text, record.updated_at)
    return _answer(
        tx, idempotency, operation, record, seed, text=text, settlement=settlement, players=players
    )


def _answer(
    tx: Transaction,
    idempotency: Idempotency,
    operation: str,
    record: RoundRecord,
    seed: bytes,
    *,
    text: str,
    settlement: Settlement | None = None,
    players: Mapping[str, str] | None = None,
) -> RoundView:
    """Record the request's answer, and give it. Every step is the operator's: its answer names
    each seat's player, ``players`` by reference if the step knows them, else read (one query)."""
    save_request(
        tx, StoredRequest(idempotency.request_id, operation, idempotency.fingerprint, text)
    )
    if players is None:
        players = seat_players(tx, [record])
    return view_of(record, seed, settlement, players=players)
