"""The dealer's round lifecycle, free of any transport.

``SHUFFLED → DEALT → REVEALED → SETTLED``, or ``VOIDED`` by an explicit (logged) operator call
before settlement, with a reason code. Once dealt the outcome is fixed: a void then reveals the
round and pays every seat the better of its result and a refund of its stake. No round stays
open: a round not dealt, or not settled, by its deadline (:mod:`~gnau_service.rounds.deadlines`)
is completed by the service itself (:meth:`Dealer.complete_due`, which
:mod:`~gnau_service.rounds.completion` calls). Every event names its ``actor``: the caller's
token or certificate, or ``service``.

Every round is an operator's (:mod:`gnau_service.audit.operators`), and every event names it.
Each call but the service's completion names the caller's ``operator``: a round of another
operator is :class:`~gnau_service.rounds.refusals.RoundNotFound`, exactly as a round that does
not exist, and a table id or request id is the operator's own, so two operators may both have an
open round at one table id, and one reusing another's request id makes a request of its own.
Reads take ``operator=None`` for every operator's rounds (an all-operator auditor, or the
public, who see only rounds whose seed is public).

Every change is one unit of work in the store (a step): the round row, its audit event and the
request record commit together or not at all, so after a crash a round is
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
from dataclasses import dataclass, field, replace

from gnau_service.audit.actors import SERVICE
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.operators import operator_id
from gnau_service.audit.round_events import (
    SOFTWARE_FIELD,
    VoidReason,
    committed_payload,
    dealt_payload,
    played_at,
    revealed_payload,
    settle_round,
    settled_payload,
    voided_payload,
    with_actor,
    with_actor_and_operator,
)
from gnau_service.audit.software import software_identity
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.round import CommittedRound, DealtRound
from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rounds.catalogue import TableConfig, played_under, shuffle_table
from gnau_service.rounds.deadlines import Deadlines
from gnau_service.rounds.identities import (
    deal_fingerprint,
    planned_references,
    retried_names,
    seat_players,
    seat_references,
)
from gnau_service.rounds.limits import DEFAULT_MAX_STAKE
from gnau_service.rounds.paging import next_page_token, page_limit, read_page_token
from gnau_service.rounds.planning import P, PlanCounts, Planned
from gnau_service.rounds.record import (
    DEALT_STATES,
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
    SeatLimits,
    SeatRequest,
    check_completed_by,
    check_round_id,
    check_table_id,
    check_void_reason,
    locked_seats,
)
from gnau_service.rounds.view import RoundView, dealt_round, dealt_round_of, view_of
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import Settlement
from gnau_service.store import (
    LogReader,
    PendingEntry,
    PreparedEvent,
    Store,
    Transaction,
    prepare_event,
)
from gnau_service.store.reader import ReadSource
from gnau_service.store.round_rows import (
    OpenRoundExists,
    StoredRequest,
    claim_table,
    find_request,
    find_request_and_round,
    insert_round,
    list_rounds,
    load_round,
    lock_round,
    read_round,
    record_completion,
    save_request,
    set_deadline,
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
    deadlines: Deadlines = field(default_factory=Deadlines)
    #: How the steps planned ahead of the writers' turn went (for metrics).
    plans: PlanCounts = field(default_factory=PlanCounts)

    async def shuffle(
        self,
        table_id: str,
        rules: HouseRules,
        idempotency: Idempotency,
        *,
        operator: str,
        actor: str,
        deadline: float | None = None,
    ) -> RoundView:
        """Start a round of ``operator`` at its table ``table_id``. Its rule set's figures,
        looked up in the shipped table (:meth:`ReturnToPlayer.of_rules`, never computed here),
        go into its log entry and record. ``operator``, here and in every step: the caller's,
        whose rounds and request ids the step sees. ``actor``: who asks
        (:mod:`gnau_service.audit.actors`), named by the step's log entry. ``deadline``: the
        call's, as :meth:`Store.run_async <gnau_service.store.store.Store.run_async>` takes
        it."""
        check_table_id(table_id)
        operator_id(operator)
        # A v3 round (CURRENT_VERSION): its seats will name their players by reference
        # (docs/privacy.md), and its stakes stay out of the shuffle's input. Made
        # before the unit waits for its turn (its commitment is a hash of the fresh seed); a
        # retried request, answered from its record, leaves it unused.
        committed = CommittedRound.with_fresh_seed(f"r-{secrets.token_hex(12)}", rules)

        def unit(tx: Transaction) -> Answer:
            request = find_request(tx, operator, idempotency.request_id)
            if request is not None:
                return _replay(tx, idempotency, "Shuffle", request)
            # Refused before anything is claimed or drawn: the catalogue says whether this
            # table deals now, and under what (the round keeps the version it was shuffled under).
            table = shuffle_table(tx, operator, table_id, rules)
            # The table first, its event after: the previous round's last event must have
            # committed before this one takes its place in the outbox (see claim_table).
            try:
                claim_table(tx, operator, table_id)
            except OpenRoundExists as busy:
                raise TableBusy(table_id, *busy.args) from None
            disclosed = ReturnToPlayer.of_rules(rules)
            entry = tx.append(
                EntryKind.ROUND_COMMITTED,
                with_actor_and_operator(
                    committed_payload(committed, table_id, disclosed)
                    | played_at(table.version, table.config.currency),
                    actor,
                    operator,
                ),
                round_id=committed.round_id,
            )
            due_at = table.config.deadlines(self.deadlines).deal_due(tx.time)
            set_deadline(tx, committed.round_id, due_at)
            record = RoundRecord(
                round_id=committed.round_id,
                table_id=table_id,
                state=RoundState.SHUFFLED,
                rules=rules,
                commitment=committed.commitment,
                key_id=self.store.signer.key_id.hex(),
                created_at=tx.time,
                updated_at=tx.time,
                operator=operator,
                log_indices=(-entry.id,),
                return_to_player=disclosed,
                version=committed.version,
                due_at=due_at,
                table_version=table.version,
                currency=table.config.currency,
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
        operator: str,
        actor: str,
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

        def plan(source: ReadSource, record: RoundRecord, seed: bytes) -> DealPlan:
            table = self._table(source, record)
            limits = (
                SeatLimits(self.max_stake) if table is None else table.seat_limits(self.max_stake)
            )
            locked, locked_beacon = locked_seats(record.rules, seats, beacon, limits)
            basis = DealPlan(table, locked, locked_beacon)
            if not isinstance(source, LogReader):
                return basis  # planned by the unit itself, which names the seats once
            # Ahead: the seats named by reference as their players' keys are now (outside the
            # shuffle's input, so a key made now moves no card), and the deal they make.
            named: tuple[LockedSeat, ...] = locked
            made: dict[str, bytes] = {}
            if record.version is not FairnessVersion.V1:
                named, made = planned_references(source, record.operator, round_id, locked)
            return replace(
                basis, ahead=_named_deal(record, seed, actor, named, made, locked_beacon)
            )

        def to_dealt(
            tx: Transaction, record: RoundRecord, seed: bytes, plan: DealPlan
        ) -> RoundView:
            ahead = plan.ahead
            # The answer names each seat's player: known here, so not read back.
            players: dict[str, str] = {}
            named = plan.by_id
            if record.version is not FairnessVersion.V1:
                made: dict[str, bytes] = {} if ahead is None else ahead.made
                named = seat_references(tx, record.operator, round_id, plan.by_id, made)
                players = {
                    seat.player: asked.player for seat, asked in zip(named, plan.by_id, strict=True)
                }
            if ahead is None or ahead.named != named:
                if ahead is not None:  # another deal made a key for one of its players
                    self.plans.recomputed += 1
                ahead = _named_deal(record, seed, actor, named, {}, plan.beacon)
            names = [(seat.seat_number, seat.player) for seat in named]
            keyed = replace(
                idempotency, fingerprint=deal_fingerprint(idempotency.fingerprint, names)
            )
            entry = tx.append_prepared(ahead.event)
            table = plan.table
            deadlines = self.deadlines if table is None else table.deadlines(self.deadlines)
            due_at = deadlines.settle_due(tx.time)
            set_deadline(tx, round_id, due_at)
            record = replace(
                record,
                state=RoundState.DEALT,
                seats=ahead.dealt.locked.seats,
                beacon=plan.beacon,
                transcript_hash=ahead.dealt.locked.transcript_hash,
                updated_at=tx.time,
                log_indices=(*record.log_indices, -entry.id),
                due_at=due_at,
            )
            return _save(tx, keyed, "Deal", record, seed, players=players)

        return await self._step(
            round_id,
            idempotency,
            "Deal",
            (RoundState.SHUFFLED,),
            plan=plan,
            advance=to_dealt,
            operator=operator,
            retried=retried,
            deadline=deadline,
        )

    @staticmethod
    def _table(source: ReadSource, record: RoundRecord) -> TableConfig | None:
        """The table configuration ``record`` is played under (None for a round from before
        the catalogue, held to the service's limits alone)."""
        if record.table_version is None:
            return None
        return played_under(source, record.operator, record.table_id, record.table_version)

    async def reveal(
        self,
        round_id: str,
        idempotency: Idempotency,
        *,
        operator: str,
        actor: str,
        deadline: float | None = None,
    ) -> RoundView:
        def plan(source: ReadSource, record: RoundRecord, seed: bytes) -> PreparedEvent:
            return _revealed_event(record, seed, actor)

        def to_revealed(
            tx: Transaction, record: RoundRecord, seed: bytes, event: PreparedEvent
        ) -> RoundView:
            record = _reveal(tx, record, seed, actor, event)
            return _save(tx, idempotency, "Reveal", record, seed)

        return await self._step(
            round_id,
            idempotency,
            "Reveal",
            (RoundState.DEALT,),
            plan=plan,
            advance=to_revealed,
            operator=operator,
            deadline=deadline,
        )

    async def settle(
        self,
        round_id: str,
        idempotency: Idempotency,
        *,
        operator: str,
        actor: str,
        deadline: float | None = None,
    ) -> RoundView:
        """Settle a revealed round. A Settle that finds the round settled by the service at its
        deadline gets the same answer, the settlement the service logged: the platform asked
        for what happened, and nothing is settled twice."""

        def plan(source: ReadSource, record: RoundRecord, seed: bytes) -> SettlePlan | None:
            if record.state is not RoundState.REVEALED:
                return None  # settled by the service: answered with what it logged
            return _settle_plan(record, seed, actor)

        def to_settled(
            tx: Transaction, record: RoundRecord, seed: bytes, plan: SettlePlan | None
        ) -> RoundView:
            if record.state is RoundState.SETTLED:
                if record.completed_by != SERVICE:
                    raise WrongState(round_id, record.state, "Settle")
                return _answer(tx, idempotency, "Settle", record, seed, text=record_text(record))
            record, settlement = _settle(tx, record, seed, actor, plan)
            return _save(tx, idempotency, "Settle", record, seed, settlement=settlement)

        return await self._step(
            round_id,
            idempotency,
            "Settle",
            (RoundState.REVEALED, RoundState.SETTLED),
            plan=plan,
            advance=to_settled,
            operator=operator,
            deadline=deadline,
        )

    async def void(
        self,
        round_id: str,
        reason_code: VoidReason | None,
        reason: str,
        idempotency: Idempotency,
        *,
        operator: str,
        actor: str,
        deadline: float | None = None,
    ) -> RoundView:
        """Void an open round for one of the reasons an operator may give. After the deal the
        outcome is fixed: the round is revealed (if it was not), and every seat is paid the
        better of its result and a refund of its stake."""
        code = check_void_reason(reason_code, reason)

        def to_voided(tx: Transaction, record: RoundRecord, seed: bytes, _: None) -> RoundView:
            record = _void(tx, record, seed, code=code, reason=reason, actor=actor)
            return _save(tx, idempotency, "VoidRound", record, seed)

        return await self._step(
            round_id,
            idempotency,
            "VoidRound",
            OPEN_STATES,
            plan=_nothing_planned,
            advance=to_voided,
            operator=operator,
            deadline=deadline,
        )

    async def complete_due(
        self, round_id: str, *, deadline: float | None = None
    ) -> RoundState | None:
        """Complete the round if it is still open and its deadline has passed, as the service:
        void it if it was never dealt, else reveal (if need be) and settle it, with the same
        arithmetic as Settle. The round is read locked, in the same unit of work that completes
        it, so however many processes try, one completes it and the others find it final (or
        moved to a later deadline by a step of its own) and change nothing. The state it was
        left in, or None if nothing was done. Any operator's round: its entries name the
        round's own operator."""
        check_round_id(round_id)

        def unit(tx: Transaction) -> tuple[RoundState | None, list[PendingEntry]]:
            stored = lock_round(tx, round_id)
            if stored is None:
                return None, []
            record = parsed_record(stored.record)
            if record.state not in OPEN_STATES or record.due_at is None or record.due_at > tx.time:
                return None, []
            record = with_indices(record, tx.refer(pending_ids(record)))
            seed = bytes.fromhex(stored.server_seed)
            if record.state is RoundState.SHUFFLED:
                record = _void(
                    tx, record, seed, code=VoidReason.DEAL_DEADLINE_PASSED, reason="", actor=SERVICE
                )
            else:
                if record.state is RoundState.DEALT:
                    record = _reveal(tx, record, seed, SERVICE)
                record, _ = _settle(tx, record, seed, SERVICE)
            update_round(tx, round_id, str(record.state), record_text(record), record.updated_at)
            return record.state, list(tx.appended)

        state, _ = await self.store.run_async(unit, deadline=deadline)
        return state

    async def _step(
        self,
        round_id: str,
        idempotency: Idempotency,
        operation: str,
        allowed: Collection[RoundState],
        *,
        plan: Callable[[ReadSource, RoundRecord, bytes], P],
        advance: Callable[[Transaction, RoundRecord, bytes, P], RoundView],
        operator: str,
        retried: Callable[[Transaction, RoundRecord], Idempotency] | None = None,
        deadline: float | None = None,
    ) -> RoundView:
        """One step of ``operator``'s existing round, as a unit of work: the original answer if
        the request is a retry of ``operator``'s, else ``advance`` applied to the round, its
        seed and its ``plan``, refused unless the round is in one of the ``allowed`` states (a
        round of another operator is not found). ``plan`` computes what the step writes from
        the round and its seed, reading what else it needs from a source; it is made ahead of
        the writers' turn while other processes wait for it (:mod:`~gnau_service.rounds.planning`),
        else by the unit.
        ``retried``: the idempotency a retry is matched with, given the round (by default
        ``idempotency`` itself)."""
        check_round_id(round_id)
        operator_id(operator)
        planned = self._plan_ahead(round_id, operator, allowed, plan)

        def unit(tx: Transaction) -> Answer:
            request, stored = find_request_and_round(tx, operator, idempotency.request_id, round_id)
            if request is not None:
                matched = idempotency
                if retried is not None and stored is not None:
                    matched = retried(tx, parsed_record(stored.record))
                return _replay(tx, matched, operation, request)
            if stored is None:
                raise RoundNotFound(round_id)
            record = (
                planned.record
                if planned is not None and planned.version == stored.record
                else parsed_record(stored.record)
            )
            if record.state not in allowed:
                raise WrongState(round_id, record.state, operation)
            seed = bytes.fromhex(stored.server_seed)
            made = self.plans.plan_for(planned, stored.record, lambda: plan(tx, record, seed))
            earlier = tx.refer(pending_ids(record))
            view = advance(tx, with_indices(record, earlier), seed, made)
            return view, [*earlier, *tx.appended]

        return _resolved(*await self.store.run_async(unit, deadline=deadline))

    def _plan_ahead(
        self,
        round_id: str,
        operator: str,
        allowed: Collection[RoundState],
        plan: Callable[[ReadSource, RoundRecord, bytes], P],
    ) -> Planned[P] | None:
        """The step's plan made now, from its round as committed, while other processes wait
        for the writers' turn; None otherwise, or where the step will not advance the round."""
        if not self.store.writers_contend:
            return None
        try:
            stored = read_round(self.store, round_id, operator=operator)
            if stored is None:
                return None
            record = parsed_record(stored.record)
            if record.state not in allowed:
                return None
            seed = bytes.fromhex(stored.server_seed)
            return Planned(stored.record, record, plan(self.store, record, seed))
        except Exception:  # the unit meets it again in its turn, and answers it
            return None

    def get(self, round_id: str, *, operator: str | None, public: bool = False) -> RoundView:
        """The round as it stands, if it is ``operator``'s (any operator's if None); to the
        ``public``, a round whose seed is not public yet does not exist: say nothing about it,
        as of a round of another operator. Blocking: call it from a thread."""
        check_round_id(round_id)
        stored = read_round(self.store, round_id, operator=operator)
        if stored is None or (public and RoundState(stored.state) not in SEED_IS_PUBLIC):
            raise RoundNotFound(round_id, public=public)
        (record,) = self._published([parsed_record(stored.record)])
        # The public is never told who sits where; the operator and the auditor are.
        players = {} if public else seat_players(self.store, [record])
        return view_of(record, bytes.fromhex(stored.server_seed), players=players)

    def list(
        self,
        table_id: str,
        page_size: int,
        page_token: str,
        *,
        operator: str | None,
        public: bool = False,
        completed_by: str = "",
        completed_since: str | None = None,
    ) -> tuple[list[RoundView], str]:
        """The rounds of ``operator``'s table (all its tables' if ``table_id`` is empty; with
        ``operator`` None every operator's rounds, of the tables of that id at any operator if
        one is given), newest first, and the token of the next page ("" at the end, bound to
        the table and the operator); only rounds whose seed is public if ``public``
        (to the public, no other round exists yet); only rounds completed by ``completed_by``
        and at ``completed_since`` or later, where given (reconciliation: ``service`` lists
        what the service completed at deadlines). Blocking: call it from a thread."""
        if table_id:
            check_table_id(table_id)
        check_completed_by(completed_by)
        limit = page_limit(page_size)
        after = read_page_token(page_token, table_id, operator) if page_token else None
        states = {str(state) for state in SEED_IS_PUBLIC} if public else None
        rows = list_rounds(
            self.store,
            table_id or None,
            limit + 1,
            after,
            operator=operator,
            states=states,
            completed_by=completed_by or None,
            completed_since=completed_since,
        )
        records = self._published([parsed_record(row.record) for row in rows[:limit]])
        players = {} if public else seat_players(self.store, records)  # one query for the page
        views = [
            view_of(record, bytes.fromhex(row.server_seed), players=players)
            for record, row in zip(records, rows, strict=False)
        ]
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = next_page_token(table_id, operator, last.created_at, last.round_id)
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


def _named(payload: dict[str, JsonValue], actor: str, record: RoundRecord) -> dict[str, JsonValue]:
    """A step's payload naming its ``actor`` and the round's operator; a round shuffled before
    operators goes on naming none, so that its entries agree (as replay requires)."""
    if not record.operator_logged:
        return with_actor(payload, actor)
    return with_actor_and_operator(payload, actor, record.operator)


def _advance(record: RoundRecord, state: RoundState, time: str, entry: PendingEntry) -> RoundRecord:
    return replace(
        record, state=state, updated_at=time, log_indices=(*record.log_indices, -entry.id)
    )


@dataclass(frozen=True, slots=True)
class NamedDeal:
    """A deal planned ahead (:mod:`~gnau_service.rounds.planning`): its seats as the log would
    name them then, the keys made for players who had none, the deal and its event."""

    named: tuple[LockedSeat, ...]
    made: dict[str, bytes]
    dealt: DealtRound
    event: PreparedEvent


@dataclass(frozen=True, slots=True)
class DealPlan:
    """What a Deal writes: the table it is held to, its seats as asked (by player id) and its
    beacon, checked; and the deal, if planned ahead (``ahead``: the unit names the seats, and
    deals again if they are named otherwise now)."""

    table: TableConfig | None
    by_id: tuple[LockedSeat, ...]
    beacon: Beacon | None
    ahead: NamedDeal | None = None


def _named_deal(  # noqa: PLR0917 (a NamedDeal's fields, and what makes its deal)
    record: RoundRecord,
    seed: bytes,
    actor: str,
    named: tuple[LockedSeat, ...],
    made: dict[str, bytes],
    beacon: Beacon | None,
) -> NamedDeal:
    dealt = dealt_round(record.round_id, record.rules, seed, named, beacon, record.version)
    payload: dict[str, JsonValue] = {**dealt_payload(dealt), SOFTWARE_FIELD: software_identity()}
    event = prepare_event(
        EntryKind.ROUND_DEALT, _named(payload, actor, record), round_id=record.round_id
    )
    return NamedDeal(named, made, dealt, event)


#: What a Settle writes: the settlement and its event.
SettlePlan = tuple[Settlement, PreparedEvent]


def _nothing_planned(source: ReadSource, record: RoundRecord, seed: bytes) -> None:
    """The plan of a step that computes everything in its turn (a void: rare)."""


def _revealed_event(record: RoundRecord, seed: bytes, actor: str) -> PreparedEvent:
    return prepare_event(
        EntryKind.ROUND_REVEALED,
        _named(revealed_payload(dealt_round_of(record, seed)), actor, record),
        round_id=record.round_id,
    )


def _settle_plan(record: RoundRecord, seed: bytes, actor: str) -> SettlePlan:
    settlement = settle_round(dealt_round_of(record, seed).reveal())
    event = prepare_event(
        EntryKind.ROUND_SETTLED,
        _named(settled_payload(settlement), actor, record),
        round_id=record.round_id,
    )
    return settlement, event


def _reveal(
    tx: Transaction,
    record: RoundRecord,
    seed: bytes,
    actor: str,
    event: PreparedEvent | None = None,
) -> RoundRecord:
    """Log the dealt round's seed and deck (its ``event``, if planned): REVEALED, its deadline
    unchanged."""
    entry = tx.append_prepared(event or _revealed_event(record, seed, actor))
    return _advance(record, RoundState.REVEALED, tx.time, entry)


def _settle(
    tx: Transaction,
    record: RoundRecord,
    seed: bytes,
    actor: str,
    plan: SettlePlan | None = None,
) -> tuple[RoundRecord, Settlement]:
    """Settle the revealed round at the result its hands earn (its ``plan``, if made): SETTLED
    by ``actor``."""
    settlement, event = plan or _settle_plan(record, seed, actor)
    entry = tx.append_prepared(event)
    return _finish(tx, _advance(record, RoundState.SETTLED, tx.time, entry), actor), settlement


def _void(
    tx: Transaction,
    record: RoundRecord,
    seed: bytes,
    *,
    code: VoidReason,
    reason: str,
    actor: str,
) -> RoundRecord:
    """Void the open round: before the deal it pays nothing; after it the round is revealed
    first (if it was not), and the void pays every seat the better of its result and a refund."""
    voided_in = record.state
    result = None
    if voided_in in DEALT_STATES:
        if voided_in is RoundState.DEALT:
            record = _reveal(tx, record, seed, actor)
        result = settle_round(dealt_round_of(record, seed).reveal())
    committed = CommittedRound(record.round_id, record.rules, seed, record.version)
    entry = tx.append(
        EntryKind.ROUND_VOIDED,
        _named(voided_payload(committed, code, reason, str(voided_in), result), actor, record),
        round_id=record.round_id,
    )
    record = replace(
        _advance(record, RoundState.VOIDED, tx.time, entry),
        void_reason=reason,
        void_reason_code=code,
        voided_in=voided_in,
    )
    return _finish(tx, record, actor)


def _finish(tx: Transaction, record: RoundRecord, actor: str) -> RoundRecord:
    """The round is final: no deadline, and ``actor`` completed it now."""
    record_completion(tx, record.round_id, actor)
    return replace(record, completed_by=actor, completed_at=tx.time, due_at=None)


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
    """Record the request's answer, as a request of the round's operator (the caller's: a step
    finds its operator's rounds only), and give it. Every step is the operator's: its answer
    names each seat's player, ``players`` by reference if the step knows them, else read (one
    query)."""
    save_request(
        tx,
        record.operator,
        StoredRequest(idempotency.request_id, operation, idempotency.fingerprint, text),
    )
    if players is None:
        players = seat_players(tx, [record])
    return view_of(record, seed, settlement, players=players)
