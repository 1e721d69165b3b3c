"""Deal: one card at a time, round-robin, seats in ascending order and the dealer last.

With ``h`` hands (the seats, then the dealer), card ``k`` of the shuffled deck goes to hand
``k mod h`` on pass ``k div h``; five passes use the first ``5h`` cards and the rest are set
aside. So hand number ``i`` (0-based) holds ``deck[i], deck[i + h], ..., deck[i + 4h]``.

>>> from gnau_service.rules.cards import format_cards, parse_cards
>>> deal = deal_round_robin(parse_cards("AC 2C 3C 4C 5C 6C 7C 8C 9C TC JC QC KC AD 2D 3D"), [7, 3])
>>> [(hand.seat_number, format_cards(hand.cards)) for hand in deal.seat_hands]
[(3, 'AC 4C 7C TC KC'), (7, '2C 5C 8C JC AD')]
>>> format_cards(deal.dealer_hand), format_cards(deal.set_aside)
('3C 6C 9C QC 2D', '3D')
>>> try:
...     require_hands_fit(seat_count=10, decks=1)
... except DealError as error:
...     print(error)
10 seats and the dealer need 55 cards, 1 deck holds 52: at most 9 seats; raise house rule 'decks'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.fairness.errors import DealError
from gnau_service.rules.cards import CARDS_PER_DECK, Card

HAND_SIZE: Final = 5


@dataclass(frozen=True, slots=True)
class SeatHand:
    """The five cards dealt to one seat, in the order they were dealt."""

    seat_number: int
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Deal:
    """Every hand of a round, and the cards set aside."""

    seat_hands: tuple[SeatHand, ...]
    """In ascending seat-number order."""
    dealer_hand: tuple[Card, ...]
    set_aside: tuple[Card, ...]

    def hand_of(self, seat_number: int) -> tuple[Card, ...]:
        """The cards dealt to ``seat_number``."""
        for hand in self.seat_hands:
            if hand.seat_number == seat_number:
                return hand.cards
        raise KeyError(seat_number)


def cards_needed(seat_count: int) -> int:
    """Cards that five passes take: one hand per seat and one for the dealer."""
    return HAND_SIZE * (seat_count + 1)


def max_seats(decks: int) -> int:
    """The most seats whose hands, with the dealer's, fit ``decks`` decks."""
    return decks * CARDS_PER_DECK // HAND_SIZE - 1


def require_hands_fit(seat_count: int, decks: int) -> None:
    """Refuse a round whose hands do not fit its decks, before any card exists."""
    needed, available = cards_needed(seat_count), decks * CARDS_PER_DECK
    if needed > available:
        holds = "1 deck holds" if decks == 1 else f"{decks} decks hold"
        raise DealError(
            f"{seat_count} seats and the dealer need {needed} cards, {holds} {available}: "
            f"at most {max_seats(decks)} seats; raise house rule 'decks'",
            field="seats",
        )


def deal_round_robin(deck: Sequence[Card], seat_numbers: Iterable[int]) -> Deal:
    """Deal five passes from the top of ``deck`` (position 0) to the seats, then the dealer."""
    seats = sorted(seat_numbers)
    if len(set(seats)) != len(seats):
        raise DealError(f"seat numbers must be unique, got {seats}", field="seat_number")
    hand_count, dealt = len(seats) + 1, cards_needed(len(seats))
    if dealt > len(deck):
        raise DealError(
            f"{len(seats)} seats and the dealer need {dealt} cards, the deck has {len(deck)}",
            field="deck",
        )
    hands = [tuple(deck[index:dealt:hand_count]) for index in range(hand_count)]
    return Deal(
        seat_hands=tuple(
            SeatHand(seat, cards) for seat, cards in zip(seats, hands[:-1], strict=True)
        ),
        dealer_hand=hands[-1],
        set_aside=tuple(deck[dealt:]),
    )
