"""An independent, deliberately plain reading of the rules page, for tests only.

It shares nothing with ``gnau_service.rules.evaluation`` but the card type: it tries every
three-card ox, every 3/6 value of every card, and scores the result as a (category, value)
pair ordered by the rules page's hierarchy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from gnau_service.rules.cards import Card, Rank, Suit

CATEGORY_ORDER = ["NO_OX", "SINGLE_OX", "DOUBLE_OX", "NGAU_TONKU", "FIVE_SMALL", "FIVE_DUKES"]


def strength(category: str, value: int | None) -> tuple[int, int]:
    """Sort key of a result: category by the hierarchy, then value (Single-Ox 0 is best)."""
    if category == "SINGLE_OX":
        assert value is not None
        return (1, 10 if value == 0 else value)
    if category == "DOUBLE_OX":
        assert value is not None
        return (2, value)
    return (CATEGORY_ORDER.index(category), 0)


def points_options(card: Card) -> tuple[int, ...]:
    if card.rank in (Rank.THREE, Rank.SIX):
        return (3, 6)
    faces = {Rank.ACE: 1, Rank.TEN: 10, Rank.JACK: 10, Rank.QUEEN: 10, Rank.KING: 10}
    return (faces.get(card.rank, int(card.rank.value) if card.rank.value.isdigit() else 0),)


def is_duke(card: Card, ten_is_duke: bool) -> bool:
    dukes = {Rank.JACK, Rank.QUEEN, Rank.KING} | ({Rank.TEN} if ten_is_duke else set())
    return card.rank in dukes


def power_result(
    first: Card, second: Card, points: tuple[int, int], *, ten_is_duke: bool, three_six_pair: bool
) -> tuple[str, int | None]:
    """What two power cards counted at ``points`` give."""
    for ace, other in ((first, second), (second, first)):
        if ace.rank is Rank.ACE and ace.suit is Suit.SPADES and is_duke(other, ten_is_duke):
            return ("NGAU_TONKU", None)
    if three_six_pair and {first.rank, second.rank} <= {Rank.THREE, Rank.SIX}:
        return ("DOUBLE_OX", 6)
    if first.rank == second.rank:
        return ("DOUBLE_OX", list(Rank).index(first.rank) + 1)
    return ("SINGLE_OX", sum(points) % 10)


def is_ox(cards: Sequence[Card], points: Sequence[int], *, trips_make_ox: bool) -> bool:
    if sum(points) % 10 == 0:
        return True
    return trips_make_ox and cards[0].rank == cards[1].rank == cards[2].rank


def every_result(
    cards: Sequence[Card],
    *,
    ten_is_duke: bool = False,
    three_six_pair: bool = False,
    trips_make_ox: bool = True,
) -> list[tuple[str, int | None]]:
    """Every result any ox choice and any 3/6 values can make (special hands aside)."""
    results: list[tuple[str, int | None]] = []
    for ox_positions in itertools.combinations(range(5), 3):
        ox = [cards[i] for i in ox_positions]
        power = [cards[i] for i in range(5) if i not in ox_positions]
        for points in itertools.product(*(points_options(card) for card in cards)):
            ox_points = [points[i] for i in ox_positions]
            power_points = tuple(points[i] for i in range(5) if i not in ox_positions)
            if is_ox(ox, ox_points, trips_make_ox=trips_make_ox):
                results.append(
                    power_result(
                        power[0],
                        power[1],
                        (power_points[0], power_points[1]),
                        ten_is_duke=ten_is_duke,
                        three_six_pair=three_six_pair,
                    )
                )
    return results


def best_result(
    cards: Sequence[Card],
    *,
    ten_is_duke: bool = False,
    three_six_pair: bool = False,
    trips_make_ox: bool = True,
    five_small: bool = True,
) -> tuple[str, int | None]:
    """The rules page's result for five cards."""
    if all(is_duke(card, ten_is_duke) for card in cards):
        return ("FIVE_DUKES", None)
    small = (Rank.ACE, Rank.TWO, Rank.THREE, Rank.FOUR)
    if five_small and all(card.rank in small for card in cards):
        return ("FIVE_SMALL", None)
    results = every_result(
        cards, ten_is_duke=ten_is_duke, three_six_pair=three_six_pair, trips_make_ox=trips_make_ox
    )
    return max(results, key=lambda result: strength(*result), default=("NO_OX", None))
