"""Settlement of one dealer hand against any number of players, in integer minor units.

Players play the dealer, never each other. A player whose hand strictly beats the dealer's is
paid ``stake x table[player's category]``; otherwise the player pays ``stake x table[dealer's
category]``, except for ties (Five Dukes against Five Dukes always; every equal pair under
``tie=push``). Money is conserved: the deltas of a settlement sum to zero.

>>> from gnau_service.rules.cards import parse_cards
>>> table = settle(
...     parse_cards("KD 4C 3S 8D 5D"),
...     [PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), stake=10)],
...     HouseRules(),
... )
>>> table.seats[0].outcome, table.seats[0].delta, table.dealer_delta
(<Outcome.WIN: 'WIN'>, 20, -20)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from gnau_service.rules.cards import Card, Suit, check_copies
from gnau_service.rules.errors import SettlementError
from gnau_service.rules.evaluation import Category, Evaluation, Evaluator
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule


class Outcome(StrEnum):
    """A player's result against the dealer."""

    WIN = "WIN"
    LOSE = "LOSE"
    TIE = "TIE"


PAYOUTS: Final[dict[PayoutTable, dict[Category, int]]] = {
    PayoutTable.POINTS: {
        Category.NO_OX: 0,
        Category.SINGLE_OX: 1,
        Category.DOUBLE_OX: 2,
        Category.NGAU_TONKU: 5,
        Category.FIVE_SMALL: 10,
        Category.FIVE_DUKES: 10,
    },
    PayoutTable.MULTIPLIER: {
        Category.NO_OX: 0,
        Category.SINGLE_OX: 1,
        Category.DOUBLE_OX: 3,
        Category.NGAU_TONKU: 5,
        Category.FIVE_SMALL: 7,
        Category.FIVE_DUKES: 7,
    },
}

# High card: rank K high ... A low, then suit spades > hearts > clubs > diamonds.
_SUIT_STRENGTH: Final = {Suit.DIAMONDS: 0, Suit.CLUBS: 1, Suit.HEARTS: 2, Suit.SPADES: 3}


@dataclass(frozen=True, slots=True)
class PlayerHand:
    """One seat at the table: its number, its five cards and its stake in minor units."""

    seat: int
    cards: tuple[Card, ...]
    stake: int


@dataclass(frozen=True, slots=True)
class SeatSettlement:
    """How one seat came out against the dealer. ``delta`` is the player's gain (or loss)."""

    seat: int
    stake: int
    evaluation: Evaluation
    outcome: Outcome
    delta: int


@dataclass(frozen=True, slots=True)
class Settlement:
    """A settled table: the dealer's evaluation and delta, and each seat in seat order."""

    dealer: Evaluation
    dealer_delta: int
    seats: tuple[SeatSettlement, ...]

    def to_json(self) -> dict[str, object]:
        """The JSON form ``gnau settle`` prints and the audit log records."""
        return {
            "dealer": {**self.dealer.to_json(), "delta": self.dealer_delta},
            "players": [
                {
                    "seat": seat.seat,
                    **seat.evaluation.to_json(),
                    "stake": seat.stake,
                    "outcome": str(seat.outcome),
                    "delta": seat.delta,
                }
                for seat in self.seats
            ],
        }


def settle(
    dealer_cards: Sequence[Card], players: Sequence[PlayerHand], rules: HouseRules
) -> Settlement:
    """Settle every player against the dealer under ``rules``.

    Raises :class:`SettlementError` for a bad seat or stake, and :class:`CardError` for a hand
    that is not five cards or cards the decks in play cannot all hold.
    """
    _check_table(dealer_cards, players, rules)
    evaluator = Evaluator(rules)
    dealer = evaluator.evaluate(dealer_cards)
    seats = []
    for player in sorted(players, key=lambda player: player.seat):
        evaluation = evaluator.evaluate(player.cards)
        outcome = compare(evaluation, dealer, rules)
        seats.append(
            SeatSettlement(
                seat=player.seat,
                stake=player.stake,
                evaluation=evaluation,
                outcome=outcome,
                delta=_player_delta(player.stake, evaluation, dealer, outcome, rules),
            )
        )
    return Settlement(dealer=dealer, dealer_delta=-sum(s.delta for s in seats), seats=tuple(seats))


def settle_interrupted(result: Settlement) -> Settlement:
    """What an interrupted round pays once its outcome is known: every seat the better of its
    ``result`` and a refund of its stake (a delta of 0: the stake goes back), the dealer minus
    their sum. So an interruption costs the house and never the player, as UKGC RTS 10 and AGCO
    4.21 ask; evaluations and outcomes stay the result's.

    >>> from gnau_service.rules.cards import parse_cards
    >>> result = settle(
    ...     parse_cards("KD QC JS 3D 5D"),
    ...     [PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), stake=10),
    ...      PlayerHand(2, parse_cards("AC 2S 4D 8D 9C"), stake=10)],
    ...     HouseRules(),
    ... )
    >>> [seat.delta for seat in result.seats], result.dealer_delta
    ([20, -10], -10)
    >>> paid = settle_interrupted(result)
    >>> [seat.delta for seat in paid.seats], paid.dealer_delta
    ([20, 0], -20)
    """
    seats = tuple(
        SeatSettlement(seat.seat, seat.stake, seat.evaluation, seat.outcome, max(seat.delta, 0))
        for seat in result.seats
    )
    return Settlement(result.dealer, -sum(seat.delta for seat in seats), seats)


def compare(player: Evaluation, dealer: Evaluation, rules: HouseRules) -> Outcome:
    """The player's outcome against the dealer under the ``tie`` house rule."""
    if player.category is Category.FIVE_DUKES and dealer.category is Category.FIVE_DUKES:
        return Outcome.TIE
    if player.rank != dealer.rank:
        return Outcome.WIN if player.rank > dealer.rank else Outcome.LOSE
    if rules.tie is TieRule.PUSH:
        return Outcome.TIE
    if rules.tie is TieRule.HIGH_CARD and high_card(player.cards) > high_card(dealer.cards):
        return Outcome.WIN
    return Outcome.LOSE


def high_card(cards: Sequence[Card]) -> tuple[int, int]:
    """The sort key of the hand's single highest card: rank (K high, A low), then suit."""
    return max((card.face, _SUIT_STRENGTH[card.suit]) for card in cards)


def payout_units(evaluation: Evaluation, rules: HouseRules) -> int:
    """Stake multiples a win with this hand is worth: the table, doubled for a suited hand."""
    suited = len({card.suit for card in evaluation.cards}) == 1
    return category_units(evaluation.category, rules, suited=suited)


def category_units(category: Category, rules: HouseRules, *, suited: bool) -> int:
    """Stake multiples a win with a hand of ``category`` is worth, ``suited`` if its five cards
    share one suit: the one pricing rule :func:`payout_units` and the PAR sheet both use.

    >>> category_units(Category.DOUBLE_OX, HouseRules(suited_double=True), suited=True)
    4
    """
    units = PAYOUTS[rules.payout][category]
    if rules.suited_double and suited:
        units *= 2
    return units


def largest_payout(rules: HouseRules) -> int:
    """The most stake multiples one seat can win or lose under ``rules``: the table's top entry,
    doubled when suited hands pay double. A settlement's deltas are bounded by it: each seat's by
    its stake times it, the dealer's by the sum of the stakes times it.

    >>> largest_payout(HouseRules()), largest_payout(HouseRules(suited_double=True))
    (10, 20)
    >>> largest_payout(HouseRules(payout=PayoutTable.MULTIPLIER))
    7
    """
    return max(PAYOUTS[rules.payout].values()) * (2 if rules.suited_double else 1)


#: The most stake multiples a seat can win or lose under any house rules.
LARGEST_PAYOUT: Final = max(max(table.values()) for table in PAYOUTS.values()) * 2


def _player_delta(
    stake: int, player: Evaluation, dealer: Evaluation, outcome: Outcome, rules: HouseRules
) -> int:
    if outcome is Outcome.WIN:
        return stake * payout_units(player, rules)
    if outcome is Outcome.LOSE:
        return -stake * payout_units(dealer, rules)
    return 0


def _check_table(
    dealer_cards: Sequence[Card], players: Sequence[PlayerHand], rules: HouseRules
) -> None:
    if not players:
        raise SettlementError("a table needs at least one player", field="players")
    seen: set[int] = set()
    for player in players:
        if not isinstance(player.seat, int) or isinstance(player.seat, bool) or player.seat < 1:
            raise SettlementError(
                f"seat must be a positive integer, got {player.seat!r}", field="seat"
            )
        if player.seat in seen:
            raise SettlementError(f"seat {player.seat} appears twice", field="seat")
        seen.add(player.seat)
        if not isinstance(player.stake, int) or isinstance(player.stake, bool) or player.stake < 1:
            raise SettlementError(
                f"stake of seat {player.seat} must be a positive integer of minor units, "
                f"got {player.stake!r}",
                field="stake",
            )
    every_card = list(dealer_cards)
    for player in players:
        every_card.extend(player.cards)
    check_copies(every_card, rules.decks)
