"""Evaluation of many hands at once with numpy: the Monte Carlo simulation's evaluator.

Needs numpy, from the ``evidence`` extra (``pip install -e '.[evidence]'``); the service itself
never imports this module, so a plain installation does not need numpy.

A hand's rank depends only on the multiset of its cards' evaluation classes (the rank, with the
Ace of Spades as a class of its own; see :mod:`gnau_service.rules.evaluation`). So the hand is
read one card at a time through a chain of small transition tables, as a finite automaton over
multisets: the state after ``k`` cards is the index of the multiset of their ``k`` classes,
and the table of step ``k`` maps (state, next card) to the state after ``k + 1`` cards. The
last table maps straight to the hand's strength. The tables hold 1 + 14 + 105 + 560 + 2,380
states in all, and the last one is filled from :meth:`Evaluator.rank_of_classes`, the scalar
evaluator's own table, so the two agree by construction. A hand then costs five table
look-ups in numpy's inner loops, not a Python call.

Cards are given by their canonical index (:attr:`Card.index`, 0 ``AC`` to 51 ``KS``); with
several decks, physical card ``p`` of the shoe is card ``p mod 52``.

>>> import numpy as np
>>> from gnau_service.rules.cards import parse_cards
>>> hands = np.array([[card.index for card in parse_cards(text)] for text in
...     ("3C 6S 8H 4H 8C", "KD 4C 3S AS QC", "KD 4C 3S AD QC", "4D 4C 3S 8D 5D")])
>>> BatchEvaluator(HouseRules()).strengths(hands).tolist()  # Double-Ox 8, Tonku, Single-Ox 1, No Ox
[18, 24, 1, 0]
"""

from __future__ import annotations

import functools
import itertools
from typing import Final

import numpy as np
import numpy.typing as npt

from gnau_service.rules.cards import CARDS_PER_DECK, Rank, Suit, card_from_index
from gnau_service.rules.evaluation import (
    ALL_HAND_RANKS,
    HAND_SIZE,
    Category,
    Evaluator,
    HandRank,
    evaluation_class,
)
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import PAYOUTS

Cards = npt.NDArray[np.integer]
"""Card indices 0-51, one hand per row (shape ``(n, 5)``)."""

#: The strength of Five Dukes: Five Dukes against Five Dukes is always a tie.
FIVE_DUKES_STRENGTH: Final = HandRank.of(Category.FIVE_DUKES).strength
_CLASS_COUNT: Final = len(Rank) + 1
_DECK: Final = tuple(card_from_index(index) for index in range(CARDS_PER_DECK))
#: Each card's evaluation class, by card index.
CARD_CLASS: Final = np.array([evaluation_class(card) for card in _DECK], dtype=np.intp)
#: Each card's suit as 0-3, by card index (only equality of suits matters: suited hands).
CARD_SUIT: Final = np.array([card.index // len(Rank) for card in _DECK], dtype=np.int8)
_SUIT_STRENGTH: Final = {Suit.DIAMONDS: 0, Suit.CLUBS: 1, Suit.HEARTS: 2, Suit.SPADES: 3}
#: Each card's high-card key (face rank, then suit spades > hearts > clubs > diamonds), by
#: card index: the order of :func:`gnau_service.rules.settlement.high_card`.
CARD_HIGH: Final = np.array(
    [card.face * len(Suit) + _SUIT_STRENGTH[card.suit] for card in _DECK], dtype=np.int8
)


def _multisets(size: int) -> dict[tuple[int, ...], int]:
    """Every multiset of ``size`` classes (a sorted tuple) and its state index."""
    return {
        classes: index
        for index, classes in enumerate(
            itertools.combinations_with_replacement(range(_CLASS_COUNT), size)
        )
    }


@functools.cache
def _transitions() -> tuple[npt.NDArray[np.intp], ...]:
    """The tables of steps 1 to 3 (after the first card's class, before the fifth card).

    Entry ``[state * 52 + card]`` of step ``k`` is the state after ``k + 1`` cards, times 52,
    so the next step adds the next card's index without a multiplication.
    """
    tables = []
    for size in range(1, HAND_SIZE - 1):
        here, there = _multisets(size), _multisets(size + 1)
        table = np.empty(len(here) * CARDS_PER_DECK, dtype=np.intp)
        for classes, state in here.items():
            for card in range(CARDS_PER_DECK):
                grown = tuple(sorted((*classes, int(CARD_CLASS[card]))))
                table[state * CARDS_PER_DECK + card] = there[grown] * CARDS_PER_DECK
        tables.append(table)
    return tuple(tables)


@functools.cache
def _final_table(
    ten_is_duke: bool, three_six_pair: bool, trips_make_ox: bool, five_small: bool
) -> npt.NDArray[np.int8]:
    """Step 4: (state of four cards, fifth card) to the hand's strength, from the scalar table."""
    evaluator = Evaluator(
        HouseRules(
            ten_is_duke=ten_is_duke,
            three_six_pair=three_six_pair,
            trips_make_ox=trips_make_ox,
            five_small=five_small,
        )
    )
    four = _multisets(HAND_SIZE - 1)
    by_class = np.empty((len(four), _CLASS_COUNT), dtype=np.int8)
    for classes, state in four.items():
        for last in range(_CLASS_COUNT):
            by_class[state, last] = evaluator.rank_of_classes((*classes, last)).strength
    # Widened from classes to cards: column ``card`` is its class's.
    table: npt.NDArray[np.int8] = by_class[:, CARD_CLASS].reshape(-1)
    return table


class BatchEvaluator:
    """Hand strengths (:attr:`HandRank.strength`, 0 No Ox to 26 Five Dukes) of many hands at
    once, under the house rules that change evaluation."""

    def __init__(self, rules: HouseRules) -> None:
        self.rules = rules
        self._steps = _transitions()
        self._final = _final_table(
            rules.ten_is_duke, rules.three_six_pair, rules.trips_make_ox, rules.five_small
        )

    def strengths(self, cards: Cards) -> npt.NDArray[np.int8]:
        """The strength of each hand: one row of five card indices (0-51) per hand.

        Hands are not checked (five distinct physical cards of the shoe are the caller's
        business); a card index outside 0-51 raises ``IndexError``.
        """
        if cards.ndim != 2 or cards.shape[1] != HAND_SIZE:
            raise ValueError(f"hands must have shape (n, {HAND_SIZE}), got {cards.shape}")
        columns = [np.asarray(cards[:, i], dtype=np.intp) for i in range(HAND_SIZE)]
        state = CARD_CLASS.take(columns[0]) * CARDS_PER_DECK
        for step, column in zip(self._steps, columns[1:], strict=False):
            state = step.take(state + column)
        result: npt.NDArray[np.int8] = self._final.take(state + columns[-1])
        return result


def suited(cards: Cards) -> npt.NDArray[np.bool_]:
    """Whether each hand's five cards share one suit."""
    suits = CARD_SUIT.take(cards)
    result: npt.NDArray[np.bool_] = (suits == suits[:, :1]).all(axis=1)
    return result


def high_cards(cards: Cards) -> npt.NDArray[np.int8]:
    """Each hand's high-card key: its highest card by rank (K high, A low), then suit."""
    result: npt.NDArray[np.int8] = CARD_HIGH.take(cards).max(axis=1)
    return result


def payout_by_strength(rules: HouseRules) -> npt.NDArray[np.int8]:
    """Stake multiples the payout table pays a win with each strength (before suited_double)."""
    table = PAYOUTS[rules.payout]
    return np.array([table[rank.category] for rank in ALL_HAND_RANKS], dtype=np.int8)
