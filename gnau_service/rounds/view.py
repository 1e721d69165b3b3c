"""What a round shows the world at one moment, and the deal it is derived from.

The view never holds the server seed before the round is revealed (or voided). The deal is a
pure function of the round's id, rules, seed, seats and beacon, needed at every later step and
answer of the round: it is derived once and the recent ones kept (:func:`dealt_round`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from gnau_service.audit.round_events import settle_round
from gnau_service.fairness.deal import SeatHand
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.round import CommittedRound, DealtRound
from gnau_service.fairness.transcript import Beacon, LockedSeat
from gnau_service.rounds.record import SEED_IS_PUBLIC, RoundRecord, RoundState
from gnau_service.rules.cards import Card
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import Settlement, settle_interrupted


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
    #: What a void after the deal pays: each seat the better of its result and a refund.
    void_settlement: Settlement | None = None
    #: The platform's player id of each seat reference (seats after v1), for the operator's
    #: and the auditor's answers: empty for the public's, and a forgotten player's references
    #: are not in it.
    players: Mapping[str, str] = field(default_factory=dict)


def view_of(
    record: RoundRecord,
    seed: bytes,
    settlement: Settlement | None = None,
    players: Mapping[str, str] | None = None,
) -> RoundView:
    """The public view of ``record``; ``seed`` is used, and shown only once it is public;
    ``players``, the player id of each seat reference, only for the operator and the auditor."""
    public_seed = seed if record.state in SEED_IS_PUBLIC else None
    players = {} if players is None else players
    if not record.seats:
        return RoundView(record, server_seed=public_seed, players=players)
    dealt = dealt_round_of(record, seed)
    if settlement is None and record.state is RoundState.SETTLED:
        settlement = settle_round(dealt.reveal())
    void_settlement = None
    if record.voided_after_deal:
        void_settlement = settle_interrupted(settle_round(dealt.reveal()))
    return RoundView(
        record,
        hands=dealt.deal.seat_hands,
        dealer_hand=dealt.deal.dealer_hand,
        server_seed=public_seed,
        deck=dealt.deck if public_seed is not None else (),
        settlement=settlement,
        void_settlement=void_settlement,
        players=players,
    )


def revealed_round(view: RoundView) -> RevealedRound | None:
    """The round in the verifiable form of docs/fairness.md, once its seed is public; None if
    it is not, or was never dealt."""
    if view.server_seed is None or not view.record.seats:
        return None
    return dealt_round_of(view.record, view.server_seed).reveal()


def dealt_round_of(record: RoundRecord, seed: bytes) -> DealtRound:
    """The deal of a dealt round (``record`` has its seats and beacon)."""
    return dealt_round(
        record.round_id, record.rules, seed, record.seats, record.beacon, record.version
    )


@functools.lru_cache(maxsize=4096)
def dealt_round(  # noqa: PLR0917 (cached: its arguments are the cache key)
    round_id: str,
    rules: HouseRules,
    seed: bytes,
    seats: tuple[LockedSeat, ...],
    beacon: Beacon | None,
    version: FairnessVersion,
) -> DealtRound:
    """The deal is a pure function of these, needed at every later step and answer of the
    round: derive it once (the shuffle is most of a step's work), keep the recent ones."""
    return CommittedRound(round_id, rules, seed, version).lock(seats, beacon).deal()
