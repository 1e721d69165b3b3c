"""Round events: what each round event of the log records, and one round's events read back.

A round leaves, in order, ``ROUND_COMMITTED`` → ``ROUND_DEALT`` → ``ROUND_REVEALED`` →
``ROUND_SETTLED`` (or ``ROUND_VOIDED`` at any point before settlement). Their payloads are the
fields of the revealed-round JSON of :mod:`gnau_service.fairness.reveal`, each published as soon
as it exists and no sooner:

- committed: ``table_id``, ``house_rules``, ``commitment``, and since the return to player was
  disclosed, ``return_to_player`` (the rule set's figures,
  :class:`~gnau_service.rules.return_to_player.ReturnToPlayer`; older entries lack it); a round
  after v1 also says its ``"fairness_version"``, ``3`` for every round committed now, ``2`` for
  the rounds before stakes left the shuffle's input
  (:class:`~gnau_service.fairness.encoding.FairnessVersion`; an entry without it is a v1
  round's);
- dealt: ``seats``, ``beacon``, ``transcript_hash``, ``hands``, ``dealer_hand``; the seats name
  each player by a reference from v2 on (the platform's id only in v1 rounds). Each seat's
  stake is here in every version: in a v3 round, whose transcript leaves stakes out, this
  signed entry is what binds them;
- revealed: ``server_seed``, ``deck``;
- settled: the settlement (:meth:`gnau_service.rules.settlement.Settlement.to_json`);
- voided: ``reason_code`` (:class:`VoidReason`), the free-text ``reason``, the ``state`` the round
  was in, and its ``server_seed``: a void reveals the seed at once, so anyone can check it was the
  committed one. A void after the deal comes after the round's ``ROUND_REVEALED`` (the step that
  voids a dealt round reveals it first), and settles it: ``result`` is the settlement the hands
  earn, ``paid`` what each seat is paid, the better of its result and a refund
  (:func:`~gnau_service.rules.settlement.settle_interrupted`). A void from before reason codes has
  a ``reason`` only.

Since issue 37 every event also names its ``actor`` (:mod:`gnau_service.audit.actors`), and the
dealt event the ``software`` that dealt it; since issue 38 every event, the service's completions
included, names the round's ``operator`` (:mod:`gnau_service.audit.operators`; a round whose
entries name none is :data:`~gnau_service.audit.operators.DEFAULT_OPERATOR`'s). All are absent
from older logs, and none is a field of the revealed round.

The service builds its payloads here and :mod:`gnau_service.audit.replay` checks them, so the two
cannot disagree on a field.

>>> from gnau_service.fairness.round import CommittedRound
>>> from gnau_service.rules.house_rules import HouseRules
>>> committed = CommittedRound("r-1", HouseRules(), bytes(32))
>>> sorted(committed_payload(committed, "t-1"))
['commitment', 'fairness_version', 'house_rules', 'table_id']
>>> committed_version(committed_payload(committed, "t-1"))
<FairnessVersion.V3: 3>
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, cast

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.operators import DEFAULT_OPERATOR, OPERATOR_FIELD
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.round import CommittedRound, DealtRound
from gnau_service.rules.currency import Currency
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.rules.settlement import PlayerHand, Settlement, settle, settle_interrupted

COMMITTED_FIELDS: Final = ("table_id", "house_rules", "commitment")
#: The optional member of a committed entry: the disclosed figures, not part of the revealed round.
DISCLOSED_FIELD: Final = "return_to_player"
#: The member of a committed entry that a round of any version after v1 carries.
VERSION_FIELD: Final = "fairness_version"
#: The committed entry's members naming the table's catalogue version and the round's currency.
TABLE_VERSION_FIELD: Final = "table_version"
CURRENCY_FIELD: Final = "currency"
DEALT_FIELDS: Final = ("seats", "beacon", "transcript_hash", "hands", "dealer_hand")
REVEALED_FIELDS: Final = ("server_seed", "deck")
#: Who made the event happen, on every event the service writes since issue 37.
ACTOR_FIELD: Final = "actor"
#: The dealt event's record of the software that dealt the round (since issue 37).
SOFTWARE_FIELD: Final = "software"
#: The members of every void; a void after the deal adds :data:`SETTLING_VOID_FIELDS`.
VOIDED_FIELDS: Final = ("reason_code", "reason", "state", "server_seed")
SETTLING_VOID_FIELDS: Final = ("result", "paid")
#: The most bytes of UTF-8 a void's free-text reason holds (the request's limit,
#: :data:`gnau_service.rounds.limits.MAX_VOID_REASON_BYTES`, is this one).
MAX_VOID_REASON_BYTES: Final = 1024


class VoidReason(StrEnum):
    """Why a round was voided: a closed list (docs/integration.md, *When to void*). Whatever the
    reason, what the void pays follows from the round's state alone."""

    PLATFORM_FAILURE = "PLATFORM_FAILURE"
    STAKE_REJECTED = "STAKE_REJECTED"
    GAME_MALFUNCTION = "GAME_MALFUNCTION"
    TABLE_CLOSED = "TABLE_CLOSED"
    REGULATOR_ORDER = "REGULATOR_ORDER"
    #: The service's own: a shuffled round not dealt by its deal deadline.
    DEAL_DEADLINE_PASSED = "DEAL_DEADLINE_PASSED"

    @property
    def operator_may_use(self) -> bool:
        return self is not VoidReason.DEAL_DEADLINE_PASSED


def committed_payload(
    committed: CommittedRound, table_id: str, disclosed: ReturnToPlayer | None = None
) -> dict[str, JsonValue]:
    """What the shuffle makes public, with the rule set's disclosed figures when given."""
    payload: dict[str, JsonValue] = {
        "table_id": table_id,
        "house_rules": dict(committed.rules.as_dict()),
        "commitment": committed.commitment.hex(),
    }
    if committed.version is not FairnessVersion.V1:
        payload[VERSION_FIELD] = int(committed.version)
    if disclosed is not None:
        payload[DISCLOSED_FIELD] = dict(disclosed.to_json())
    return payload


def played_at(table_version: int, currency: Currency) -> dict[str, JsonValue]:
    """What a committed entry adds about its table (issue 38): the catalogue version the round
    is played under, and the currency its stakes and settlement are counted in (integer minor
    units). Entries from before the catalogue have neither."""
    return {TABLE_VERSION_FIELD: table_version, CURRENCY_FIELD: dict(currency.to_json())}


def committed_version(payload: dict[str, JsonValue]) -> FairnessVersion:
    """The fairness version a committed entry's payload declares: v1 if it names none; a
    :class:`ValueError` if it names one that is not a later version."""
    if VERSION_FIELD not in payload:
        return FairnessVersion.V1
    value = payload[VERSION_FIELD]
    if isinstance(value, bool) or not isinstance(value, int) or value == FairnessVersion.V1:
        raise ValueError(f"{VERSION_FIELD} must be a version after 1, got {value!r}")
    try:
        return FairnessVersion(value)
    except ValueError:
        raise ValueError(f"{VERSION_FIELD} {value} is not a known fairness version") from None


def dealt_payload(dealt: DealtRound) -> dict[str, JsonValue]:
    """What the deal makes public: everything locked, and the hands. Never the seed."""
    document: dict[str, Any] = dealt.reveal().to_json()
    return {key: document[key] for key in DEALT_FIELDS}


def revealed_payload(dealt: DealtRound) -> dict[str, JsonValue]:
    document: dict[str, Any] = dealt.reveal().to_json()
    return {key: document[key] for key in REVEALED_FIELDS}


def settled_payload(settlement: Settlement) -> dict[str, JsonValue]:
    return cast(dict[str, JsonValue], settlement.to_json())


def voided_payload(
    committed: CommittedRound,
    reason_code: VoidReason,
    reason: str,
    state: str,
    result: Settlement | None = None,
) -> dict[str, JsonValue]:
    """A void; after the deal, with the ``result`` the hands earn and what each seat is paid."""
    payload: dict[str, JsonValue] = {
        "reason_code": str(reason_code),
        "reason": reason,
        "state": state,
        "server_seed": committed.server_seed.hex(),
    }
    if result is not None:
        payload["result"] = settled_payload(result)
        payload["paid"] = paid_payload(settle_interrupted(result))
    return payload


def paid_payload(paid: Settlement) -> dict[str, JsonValue]:
    """What a void after the deal pays: each seat's stake and delta, and the dealer's delta."""
    return {
        "dealer_delta": paid.dealer_delta,
        "players": [
            {"seat": seat.seat, "stake": seat.stake, "delta": seat.delta} for seat in paid.seats
        ],
    }


def with_actor(payload: dict[str, JsonValue], actor: str) -> dict[str, JsonValue]:
    """``payload`` naming who made its event happen."""
    return {**payload, ACTOR_FIELD: actor}


def with_actor_and_operator(
    payload: dict[str, JsonValue], actor: str, operator: str
) -> dict[str, JsonValue]:
    """``payload`` naming who made its event happen, and whose round (or player) it is about.

    >>> with_actor_and_operator({"reason": ""}, "service", "casino-a")
    {'reason': '', 'actor': 'service', 'operator': 'casino-a'}
    """
    return {**payload, ACTOR_FIELD: actor, OPERATOR_FIELD: operator}


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

    @property
    def operator(self) -> str:
        """Whose round it is: the committed entry's operator, the default one if it names none."""
        return str(self.payload(EntryKind.ROUND_COMMITTED).get(OPERATOR_FIELD, DEFAULT_OPERATOR))


_STATE_AFTER: Final = {
    EntryKind.ROUND_COMMITTED: "SHUFFLED",
    EntryKind.ROUND_DEALT: "DEALT",
    EntryKind.ROUND_REVEALED: "REVEALED",
    EntryKind.ROUND_SETTLED: "SETTLED",
    EntryKind.ROUND_VOIDED: "VOIDED",
}
