"""Rounds in the log: what each round event records, and replaying a round from its entries.

A round leaves, in order, ``ROUND_COMMITTED`` → ``ROUND_DEALT`` → ``ROUND_REVEALED`` →
``ROUND_SETTLED`` (or ``ROUND_VOIDED`` at any point before settlement). Their payloads are the
fields of the revealed-round JSON of :mod:`gnau_service.fairness.reveal`, each published as soon
as it exists and no sooner:

- committed: ``table_id``, ``house_rules``, ``commitment``, and since the return to player was
  disclosed, ``return_to_player`` (the rule set's figures,
  :class:`~gnau_service.rules.return_to_player.ReturnToPlayer`; older entries lack it);
- dealt: ``seats``, ``beacon``, ``transcript_hash``, ``hands``, ``dealer_hand``;
- revealed: ``server_seed``, ``deck``;
- settled: the settlement (:meth:`gnau_service.rules.settlement.Settlement.to_json`);
- voided: ``reason``, the ``state`` the round was in, and its ``server_seed``: a void reveals the
  seed at once, so anyone can check it was the committed one, and a voided deal cannot hide a
  deck the dealer did not like.

So replaying is merging the first three payloads into a revealed round, running the fairness
verifier on it, and re-settling the dealt hands under the committed house rules.

>>> from gnau_service.fairness.round import CommittedRound
>>> from gnau_service.fairness.transcript import LockedSeat
>>> from gnau_service.rules.house_rules import HouseRules
>>> committed = CommittedRound("r-1", HouseRules(), bytes(32))
>>> dealt = committed.lock([LockedSeat(1, "ann", 5)]).deal()
>>> replay = RoundReplay()
>>> replay.feed(EntryKind.ROUND_COMMITTED, "r-1", committed_payload(committed, "t-1"))
>>> replay.feed(EntryKind.ROUND_DEALT, "r-1", dealt_payload(dealt))
>>> replay.feed(EntryKind.ROUND_REVEALED, "r-1", revealed_payload(dealt))
>>> replay.feed(EntryKind.ROUND_SETTLED, "r-1", settled_payload(settle_round(dealt.reveal())))
>>> replay.settled
1
>>> replay.feed(EntryKind.ROUND_DEALT, "r-1", dealt_payload(dealt))
Traceback (most recent call last):
...
gnau_service.audit.rounds.ReplayError: round r-1: ROUND_DEALT after ROUND_SETTLED
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, cast

from gnau_service.audit.entries import EntryKind, JsonValue, clip, quoted
from gnau_service.fairness.commitment import compute_commitment
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.reveal import REVEALED_ROUND_FORMAT, RevealedRound
from gnau_service.fairness.round import CommittedRound, DealtRound
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer, ReturnToPlayerError
from gnau_service.rules.settlement import PlayerHand, Settlement, settle

COMMITTED_FIELDS: Final = ("table_id", "house_rules", "commitment")
#: The optional member of a committed entry: the disclosed figures, not part of the revealed round.
DISCLOSED_FIELD: Final = "return_to_player"
DEALT_FIELDS: Final = ("seats", "beacon", "transcript_hash", "hands", "dealer_hand")
REVEALED_FIELDS: Final = ("server_seed", "deck")

# Which event may follow which: None is "nothing logged yet for this round".
_ALLOWED_AFTER: Final[dict[EntryKind, tuple[EntryKind | None, ...]]] = {
    EntryKind.ROUND_COMMITTED: (None,),
    EntryKind.ROUND_DEALT: (EntryKind.ROUND_COMMITTED,),
    EntryKind.ROUND_REVEALED: (EntryKind.ROUND_DEALT,),
    EntryKind.ROUND_SETTLED: (EntryKind.ROUND_REVEALED,),
    EntryKind.ROUND_VOIDED: (
        EntryKind.ROUND_COMMITTED,
        EntryKind.ROUND_DEALT,
        EntryKind.ROUND_REVEALED,
    ),
}


class ReplayError(ValueError):
    """A round whose entries do not follow from each other; the message names round and link."""


def committed_payload(
    committed: CommittedRound, table_id: str, disclosed: ReturnToPlayer | None = None
) -> dict[str, JsonValue]:
    """What the shuffle makes public, with the rule set's disclosed figures when given."""
    payload: dict[str, JsonValue] = {
        "table_id": table_id,
        "house_rules": dict(committed.rules.as_dict()),
        "commitment": committed.commitment.hex(),
    }
    if disclosed is not None:
        payload[DISCLOSED_FIELD] = dict(disclosed.to_json())
    return payload


def dealt_payload(dealt: DealtRound) -> dict[str, JsonValue]:
    """What the deal makes public: everything locked, and the hands. Never the seed."""
    document: dict[str, Any] = dealt.reveal().to_json()
    return {key: document[key] for key in DEALT_FIELDS}


def revealed_payload(dealt: DealtRound) -> dict[str, JsonValue]:
    document: dict[str, Any] = dealt.reveal().to_json()
    return {key: document[key] for key in REVEALED_FIELDS}


def settled_payload(settlement: Settlement) -> dict[str, JsonValue]:
    return cast(dict[str, JsonValue], settlement.to_json())


def voided_payload(committed: CommittedRound, reason: str, state: str) -> dict[str, JsonValue]:
    return {"reason": reason, "state": state, "server_seed": committed.server_seed.hex()}


def settle_round(revealed: RevealedRound) -> Settlement:
    """Settle a round's hands under its house rules: each seat at its stake against the dealer.

    The service settles ``dealt.reveal()`` (in memory, before the seed is published); replay
    settles what the log published. Both go through here, so they cannot drift apart.
    """
    stakes = {seat.seat_number: seat.stake for seat in revealed.seats}
    return settle(
        revealed.dealer_hand,
        [PlayerHand(h.seat_number, h.cards, stakes[h.seat_number]) for h in revealed.seat_hands],
        revealed.rules,
    )


@dataclass
class _RoundState:
    last: EntryKind
    document: dict[str, Any]


@dataclass(frozen=True)
class RoundCheck:
    """The costly part of replaying one event (fairness, settlement, or a void's seed), apart
    from the ordering, so that it can run in another process. :meth:`run` raises
    :class:`ReplayError` if the event does not follow from the round's earlier ones."""

    kind: EntryKind
    round_id: str
    document: dict[str, Any]
    payload: dict[str, JsonValue]

    def run(self) -> None:
        if self.kind is EntryKind.ROUND_REVEALED:
            _verify_fairness(self.round_id, self.document)
        elif self.kind is EntryKind.ROUND_SETTLED:
            # Its fairness was the reveal's check, which always comes first.
            _verify_settlement(self.round_id, _read(self.round_id, self.document), self.payload)
        else:
            _verify_void(self.round_id, self.document, self.payload)


def run_check(check: RoundCheck) -> str | None:
    """:meth:`RoundCheck.run` as a reason or None: the shape a worker process returns."""
    try:
        check.run()
    except ReplayError as error:
        return str(error)
    return None


@dataclass
class RoundReplay:
    """Replays round events in log order; :meth:`feed` raises :class:`ReplayError` on the first
    event that does not follow from the ones before it."""

    settled: int = 0
    voided: int = 0
    _rounds: dict[str, _RoundState] = field(default_factory=dict)

    def knows(self, round_id: str) -> bool:
        """Whether the round's commitment has been replayed."""
        return round_id in self._rounds

    @property
    def open_rounds(self) -> list[str]:
        """Rounds neither settled nor voided (still in play when the log was read)."""
        return [
            round_id
            for round_id, state in self._rounds.items()
            if state.last not in (EntryKind.ROUND_SETTLED, EntryKind.ROUND_VOIDED)
        ]

    def feed(self, kind: EntryKind, round_id: str, payload: dict[str, JsonValue]) -> None:
        """Replay one event completely, here and now."""
        check = self.stage(kind, round_id, payload)
        if check is not None:
            check.run()

    def stage(
        self, kind: EntryKind, round_id: str, payload: dict[str, JsonValue]
    ) -> RoundCheck | None:
        """Check the event's place in its round and take in its fields; return the costly
        rest of its replay, for the caller to run (here, or in a worker process)."""
        state = self._rounds.get(round_id)
        last = None if state is None else state.last
        if last not in _ALLOWED_AFTER[kind]:
            after = "before anything else" if last is None else f"after {last}"
            raise ReplayError(f"round {round_id}: {kind} {after}")
        if kind is EntryKind.ROUND_COMMITTED:
            # Exactly its own fields: a payload member must not stand in for the round id or
            # format that replay puts in the document itself.
            with_figures = DISCLOSED_FIELD in payload
            fields = _only(
                payload,
                (*COMMITTED_FIELDS, DISCLOSED_FIELD) if with_figures else COMMITTED_FIELDS,
                round_id,
                kind,
            )
            if with_figures:
                _check_disclosed(round_id, payload[DISCLOSED_FIELD])
            document: dict[str, Any] = {"format": REVEALED_ROUND_FORMAT, "round_id": round_id}
            document |= {key: fields[key] for key in ("house_rules", "commitment")}
            self._rounds[round_id] = _RoundState(kind, document)
            return None
        assert state is not None
        state.last = kind
        if kind is EntryKind.ROUND_DEALT:
            state.document.update(_only(payload, DEALT_FIELDS, round_id, kind))
            return None
        if kind is EntryKind.ROUND_REVEALED:
            state.document.update(_only(payload, REVEALED_FIELDS, round_id, kind))
            return RoundCheck(kind, round_id, dict(state.document), {})
        if kind is EntryKind.ROUND_SETTLED:
            self.settled += 1
        else:
            self.voided += 1
        # Finished: keep only its last event, enough to refuse anything after it.
        self._rounds[round_id] = _RoundState(kind, {})
        return RoundCheck(kind, round_id, state.document, payload)


def _read(round_id: str, document: dict[str, Any]) -> RevealedRound:
    try:
        return RevealedRound.from_json(document)
    except FairnessError as error:
        raise ReplayError(
            f"round {round_id}: its logged fields do not form a round: {clip(str(error))}"
        ) from None


def _verify_fairness(round_id: str, document: dict[str, Any]) -> None:
    revealed = _read(round_id, document)
    report = verify_revealed_round(revealed)
    if not report.ok:
        raise ReplayError(f"round {round_id}: {clip(str(report.first_failure))}")


def _verify_void(round_id: str, document: dict[str, Any], payload: dict[str, JsonValue]) -> None:
    seed, reason = payload.get("server_seed"), payload.get("reason")
    if not isinstance(seed, str) or not isinstance(reason, str) or not reason:
        raise ReplayError(f"round {round_id}: ROUND_VOIDED must carry a reason and the seed")
    house_rules = document.get("house_rules")
    if not isinstance(house_rules, dict):
        raise ReplayError(
            f"round {round_id}: its void cannot be checked: the committed house_rules are "
            f"{quoted(house_rules)}, not a JSON object"
        )
    try:
        rules = HouseRules.from_mapping(house_rules)
        commitment = compute_commitment(round_id, rules, bytes.fromhex(seed))
    except (ValueError, RulesError, FairnessError) as error:
        raise ReplayError(
            f"round {round_id}: its void cannot be checked: {clip(str(error))}"
        ) from None
    if commitment.hex() != document.get("commitment"):
        raise ReplayError(
            f"round {round_id}: the seed revealed by its void does not match its commitment"
        )


def _verify_settlement(
    round_id: str, revealed: RevealedRound, payload: dict[str, JsonValue]
) -> None:
    # The reveal's check refuses a round whose hands are not one per locked seat, but it may run
    # in another worker at the same time as this one, so settling must not assume it passed.
    seats = [seat.seat_number for seat in revealed.seats]
    if [hand.seat_number for hand in revealed.seat_hands] != seats:
        raise ReplayError(f"round {round_id}: its hands are not one for each locked seat {seats}")
    try:
        expected = settle_round(revealed).to_json()
    except RulesError as error:
        raise ReplayError(
            f"round {round_id}: its hands cannot be settled: {clip(str(error))}"
        ) from None
    if payload != expected:
        raise ReplayError(
            f"round {round_id}: the logged settlement does not follow from the dealt hands "
            f"({_first_difference(expected, payload)})"
        )


def _check_disclosed(round_id: str, figures: JsonValue) -> None:
    """The shape of the disclosed figures and their agreement with each other. Whether they
    are the rule set's is for its PAR sheet to say (``gnau par``, docs/par.md): replay does not
    spend seconds per rule set recomputing it."""
    try:
        ReturnToPlayer.from_json(figures)
    except ReturnToPlayerError as error:
        raise ReplayError(f"round {round_id}: {clip(str(error))}") from None


def _only(
    payload: dict[str, JsonValue], fields: tuple[str, ...], round_id: str, kind: EntryKind
) -> dict[str, JsonValue]:
    if set(payload) != set(fields):
        raise ReplayError(
            f"round {round_id}: {kind} must carry exactly {', '.join(fields)}, "
            f"got {quoted(sorted(payload), 120)}"
        )
    return payload


def _first_difference(expected: object, logged: object, path: str = "settlement") -> str:
    if isinstance(expected, dict) and isinstance(logged, dict):
        for key in sorted(set(expected) | set(logged)):
            if expected.get(key) != logged.get(key):
                return _first_difference(expected.get(key), logged.get(key), f"{path}.{key}")
    if isinstance(expected, list) and isinstance(logged, list) and len(expected) == len(logged):
        for position, (ours, theirs) in enumerate(zip(expected, logged, strict=True)):
            if ours != theirs:
                return _first_difference(ours, theirs, f"{path}[{position}]")
    return f"{path} is {quoted(logged)}, the rules give {quoted(expected)}"


@dataclass(frozen=True)
class RoundEvent:
    """One logged event of a round, as read back: where, when, what."""

    index: int
    time: str
    kind: EntryKind
    payload: dict[str, JsonValue]


@dataclass(frozen=True)
class RoundHistory:
    """Everything the log holds about one round, in order: the record game recall shows."""

    round_id: str
    events: tuple[RoundEvent, ...]

    def event(self, kind: EntryKind) -> RoundEvent | None:
        return next((event for event in self.events if event.kind is kind), None)

    def payload(self, kind: EntryKind) -> dict[str, JsonValue]:
        event = self.event(kind)
        return {} if event is None else event.payload

    @property
    def state(self) -> str:
        """SHUFFLED, DEALT, REVEALED, SETTLED or VOIDED: the state the last event left."""
        return _STATE_AFTER[self.events[-1].kind]

    @property
    def table_id(self) -> str:
        return str(self.payload(EntryKind.ROUND_COMMITTED).get("table_id", "?"))


_STATE_AFTER: Final = {
    EntryKind.ROUND_COMMITTED: "SHUFFLED",
    EntryKind.ROUND_DEALT: "DEALT",
    EntryKind.ROUND_REVEALED: "REVEALED",
    EntryKind.ROUND_SETTLED: "SETTLED",
    EntryKind.ROUND_VOIDED: "VOIDED",
}
