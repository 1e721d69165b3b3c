"""Evaluation of a five-card hand: category, value, and the cards that made it.

Two evaluators give the same answers:

- :class:`OxSearch` tries every ox choice and every 3/6 value, card by card. It is the
  reference reading of the rules and the baseline of the benchmark.
- :class:`Evaluator` looks the hand up in a table built by :class:`OxSearch` once per set of
  house rules. The table is keyed by the hand's *rank multiset*, with the Ace of Spades counted
  as a fourteenth rank, because that is the only suit fact evaluation depends on (Ngau Tonku).

>>> from gnau_service.rules.cards import parse_cards
>>> evaluator = Evaluator(HouseRules())
>>> evaluator.evaluate(parse_cards("3C 6S 8H 4H 8C")).describe()
'Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C'
>>> evaluator.rank(parse_cards("KD 4C 3S AS QC"))
HandRank(NGAU_TONKU)
>>> evaluator.rank(parse_cards("KD 4C 3S AD QC")) < evaluator.rank(parse_cards("KD 4C 3S AS QC"))
True
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gnau_service.rules.cards import Card, Rank, Suit, check_copies, format_cards, standard_deck
from gnau_service.rules.errors import CardError
from gnau_service.rules.house_rules import HouseRules

HAND_SIZE: Final = 5


class Category(StrEnum):
    """Hand categories, weakest first."""

    NO_OX = "NO_OX"
    SINGLE_OX = "SINGLE_OX"
    DOUBLE_OX = "DOUBLE_OX"
    NGAU_TONKU = "NGAU_TONKU"
    FIVE_SMALL = "FIVE_SMALL"
    FIVE_DUKES = "FIVE_DUKES"

    @property
    def display_name(self) -> str:
        """The category as people say it: ``Double-Ox``."""
        return _TITLES[self]


_TITLES: Final = {
    Category.NO_OX: "No Ox",
    Category.SINGLE_OX: "Single-Ox",
    Category.DOUBLE_OX: "Double-Ox",
    Category.NGAU_TONKU: "Ngau Tonku",
    Category.FIVE_SMALL: "Five Small",
    Category.FIVE_DUKES: "Five Dukes",
}


@dataclass(frozen=True, slots=True, order=True)
class HandRank:
    """A category with its value, totally ordered by strength.

    ``value`` is the pair's face rank 1-13 for Double-Ox, the ones digit 0-9 for Single-Ox,
    and ``None`` otherwise. ``strength`` runs from 0 (No Ox) to 26 (Five Dukes): Single-Ox 1-9
    are 1-9, Single-Ox 0 is 10, Double-Ox A-K are 11-23, then Ngau Tonku, Five Small, Five Dukes.

    >>> [str(rank) for rank in sorted(ALL_HAND_RANKS)[:3] + sorted(ALL_HAND_RANKS)[-3:]]
    ['No Ox', 'Single-Ox 1', 'Single-Ox 2', 'Ngau Tonku', 'Five Small', 'Five Dukes']
    """

    strength: int
    category: Category = field(compare=False)
    value: int | None = field(compare=False)

    @staticmethod
    def of(category: Category, value: int | None = None) -> HandRank:
        """The rank of ``category`` with ``value`` (checked against the category)."""
        return _RANK_BY_NAME[(category, value)]

    @property
    def label(self) -> str:
        """``CATEGORY`` or ``CATEGORY:value``, the key used by ``gnau stats``."""
        return str(self.category) if self.value is None else f"{self.category}:{self.value}"

    def __str__(self) -> str:
        if self.category is Category.DOUBLE_OX:
            assert self.value is not None
            return f"Double-Ox {Rank(_RANK_BY_FACE[self.value]).label}"
        if self.category is Category.SINGLE_OX:
            return f"Single-Ox {self.value}"
        return self.category.display_name

    def __repr__(self) -> str:
        return f"HandRank({self.label})"


_RANK_BY_FACE: Final = {rank.face: rank for rank in Rank}


def _all_hand_ranks() -> tuple[HandRank, ...]:
    named: list[tuple[Category, int | None]] = [(Category.NO_OX, None)]
    named += [(Category.SINGLE_OX, value) for value in (1, 2, 3, 4, 5, 6, 7, 8, 9, 0)]
    named += [(Category.DOUBLE_OX, face) for face in range(1, 14)]
    named += [(Category.NGAU_TONKU, None), (Category.FIVE_SMALL, None)]
    named += [(Category.FIVE_DUKES, None)]
    return tuple(
        HandRank(strength, category, value) for strength, (category, value) in enumerate(named)
    )


ALL_HAND_RANKS: Final = _all_hand_ranks()
_RANK_BY_NAME: Final = {(rank.category, rank.value): rank for rank in ALL_HAND_RANKS}


@dataclass(frozen=True, slots=True)
class Reading:
    """How the five cards, in the order given, were read: which make the ox and which the power.

    ``points`` holds, for each card, the Ox points it was counted at (3 and 6 as chosen).
    """

    rank: HandRank
    ox: tuple[int, ...]
    power: tuple[int, ...]
    points: tuple[int, ...]
    nenku: bool


@dataclass(frozen=True)
class Evaluation:
    """The full result for one hand: its rank and the cards that made it.

    >>> from gnau_service.rules.cards import parse_cards
    >>> hand = Evaluator(HouseRules()).evaluate(parse_cards("KD 4C 3S AD QC"))
    >>> hand.category, hand.value, hand.nenku, [str(card) for card in hand.power]
    (<Category.SINGLE_OX: 'SINGLE_OX'>, 1, True, ['KD', 'AD'])
    """

    cards: tuple[Card, ...]
    rank: HandRank
    ox: tuple[Card, ...]
    power: tuple[Card, ...]
    points: tuple[int, ...]
    nenku: bool

    @property
    def category(self) -> Category:
        return self.rank.category

    @property
    def value(self) -> int | None:
        return self.rank.value

    def counted_points(self, card: Card) -> int:
        """The Ox points ``card`` (one of this hand's) was counted at."""
        return self.points[self.cards.index(card)]

    def describe(self) -> str:
        """One readable line: ``Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C``."""
        title = str(self.rank) + (" (Nenku)" if self.nenku else "")
        if not self.ox:
            return f"{title}  {format_cards(self.cards)}"
        ox = " ".join(self._annotated(card) for card in self.ox)
        power = " ".join(self._annotated(card) for card in self.power)
        return f"{title}  ox {ox}  power {power}"

    def to_json(self) -> dict[str, object]:
        """The evaluation as JSON values (the form ``gnau evaluate --json`` prints)."""
        return {
            "cards": [str(card) for card in self.cards],
            "category": str(self.category),
            "value": self.value,
            "ox": [str(card) for card in self.ox],
            "power": [str(card) for card in self.power],
            "points": list(self.points),
            "nenku": self.nenku,
            "strength": self.rank.strength,
            "description": self.describe(),
        }

    def _annotated(self, card: Card) -> str:
        if card.rank in (Rank.THREE, Rank.SIX):
            return f"{card}({self.counted_points(card)})"
        return str(card)


class OxSearch:
    """The reference evaluator: every ox choice, every 3/6 value, best result wins.

    >>> from gnau_service.rules.cards import parse_cards
    >>> OxSearch(HouseRules()).read(parse_cards("KC 7S 3H JH 7C")).rank
    HandRank(SINGLE_OX:0)
    """

    def __init__(self, rules: HouseRules) -> None:
        self._dukes = _DUKE_FACES_WITH_TEN if rules.ten_is_duke else _DUKE_FACES
        self._three_six_pair = rules.three_six_pair
        self._trips_make_ox = rules.trips_make_ox
        self._five_small = rules.five_small

    def read(self, cards: Sequence[Card]) -> Reading:
        """The best reading of five cards (assumed valid)."""
        best_key = (-1, False)
        best: Reading | None = None
        for ox, power in _SPLITS:
            ox_points = self._ox_points(cards[ox[0]], cards[ox[1]], cards[ox[2]])
            if ox_points is None:
                continue
            rank, power_points, nenku = self._power(cards[power[0]], cards[power[1]])
            if (rank.strength, nenku) > best_key:
                # Among equally strong readings the first shown a Nenku wins, so the mark is stable.
                best_key = (rank.strength, nenku)
                points = [0] * HAND_SIZE
                for position, value in zip(ox + power, ox_points + power_points, strict=True):
                    points[position] = value
                best = Reading(rank, ox, power, tuple(points), nenku)
        if best is None:
            best = Reading(_NO_OX, (), (), tuple(_points(card) for card in cards), False)
        special = self._special_rank(cards)
        if special is not None:
            best = Reading(special, best.ox, best.power, best.points, False)
        return best

    def _special_rank(self, cards: Sequence[Card]) -> HandRank | None:
        if all(card.face in self._dukes for card in cards):
            return HandRank.of(Category.FIVE_DUKES)
        if self._five_small and all(card.face <= _FOUR for card in cards):
            return HandRank.of(Category.FIVE_SMALL)
        return None

    def _ox_points(self, *ox: Card) -> tuple[int, ...] | None:
        """The Ox points that make these three cards an ox, or ``None`` if none do.

        Each 3 or 6 adds 3 or 6, so only *how many* of them count as 6 matters; sixes are given
        to real 6s first, so a card keeps its face value where it can.
        """
        fixed = flexible = 0
        for card in ox:
            if card.face in _THREE_SIX:
                flexible += 1
            else:
                fixed += _points(card)
        for sixes in range(flexible + 1):
            if (fixed + 3 * (flexible + sixes)) % 10 == 0:
                return _count_sixes(ox, sixes)
        if self._trips_make_ox and ox[0].face == ox[1].face == ox[2].face:
            return tuple(_points(card) for card in ox)
        return None

    def _power(self, first: Card, second: Card) -> tuple[HandRank, tuple[int, int], bool]:
        """The strength two power cards give, the points they count at, and the Nenku mark."""
        face_points = (_points(first), _points(second))
        if first.face == _ACE and second.face in self._dukes:
            return _ace_and_duke(first, face_points)
        if second.face == _ACE and first.face in self._dukes:
            return _ace_and_duke(second, face_points)
        if self._three_six_pair and first.face in _THREE_SIX and second.face in _THREE_SIX:
            return _DOUBLE_OX[_SIX], (6, 6), False
        if first.face == second.face:
            return _DOUBLE_OX[first.face], face_points, False
        best_points = max(
            itertools.product(first.rank.ox_points, second.rank.ox_points),
            key=lambda points: _SINGLE_OX[sum(points) % 10],
        )
        return _SINGLE_OX[sum(best_points) % 10], (best_points[0], best_points[1]), False


def _points(card: Card) -> int:
    """The card's Ox points at face value (a 3 as 3, a 6 as 6)."""
    return min(card.face, 10)


def _ace_and_duke(
    ace: Card, face_points: tuple[int, int]
) -> tuple[HandRank, tuple[int, int], bool]:
    if ace.suit is Suit.SPADES:
        return _NGAU_TONKU, face_points, False
    return _SINGLE_OX[1], face_points, True


def _count_sixes(ox: Sequence[Card], sixes: int) -> tuple[int, ...]:
    """Points for an ox whose 3s and 6s count ``sixes`` times as 6, real 6s first."""
    flexible = sorted(
        (i for i, card in enumerate(ox) if card.face in _THREE_SIX), key=lambda i: -ox[i].face
    )
    counted_as_six = flexible[:sixes]
    return tuple(
        (6 if i in counted_as_six else 3) if card.face in _THREE_SIX else _points(card)
        for i, card in enumerate(ox)
    )


_ACE: Final = Rank.ACE.face
_FOUR: Final = Rank.FOUR.face
_SIX: Final = Rank.SIX.face
_THREE_SIX: Final = frozenset({Rank.THREE.face, Rank.SIX.face})
_DUKE_FACES: Final = frozenset({Rank.JACK.face, Rank.QUEEN.face, Rank.KING.face})
_DUKE_FACES_WITH_TEN: Final = _DUKE_FACES | {Rank.TEN.face}
_SPLITS: Final = tuple(
    (ox, tuple(i for i in range(HAND_SIZE) if i not in ox))
    for ox in itertools.combinations(range(HAND_SIZE), 3)
)
_NO_OX: Final = HandRank.of(Category.NO_OX)
_NGAU_TONKU: Final = HandRank.of(Category.NGAU_TONKU)
# Indexed by the ones digit, and by the face rank (index 0 unused), for the inner loop.
_SINGLE_OX: Final = tuple(HandRank.of(Category.SINGLE_OX, value) for value in range(10))
_DOUBLE_OX: Final = (_NO_OX, *(HandRank.of(Category.DOUBLE_OX, face) for face in range(1, 14)))

# An evaluation class is a rank, except that the Ace of Spades is a class of its own.
_CLASS_COUNT: Final = 14
_ACE_OF_SPADES_CLASS: Final = 0


def evaluation_class(card: Card) -> int:
    """The card's evaluation class: 0 for the Ace of Spades, otherwise its face rank 1-13."""
    if card.face == _ACE and card.suit is Suit.SPADES:
        return _ACE_OF_SPADES_CLASS
    return card.face


def class_representative(class_id: int) -> Card:
    """A card of the class: the Ace of Spades, or the rank in clubs."""
    return _REPRESENTATIVES[class_id]


_REPRESENTATIVES: Final = (Card(Rank.ACE, Suit.SPADES), *(Card(rank, Suit.CLUBS) for rank in Rank))


# A multiset of classes is keyed by a base-6 numeral of its class counts (no class holds more
# than five of a hand's cards), so the key of a hand is a sum of five per-card weights.
_CLASS_WEIGHT: Final = tuple(6**c for c in range(_CLASS_COUNT))
_CARD_WEIGHT: Final = tuple(_CLASS_WEIGHT[evaluation_class(card)] for card in standard_deck())


def class_multisets() -> itertools.combinations_with_replacement[tuple[int, ...]]:
    """Every multiset of five evaluation classes, as sorted tuples."""
    return itertools.combinations_with_replacement(range(_CLASS_COUNT), HAND_SIZE)


def multiset_key(classes: Sequence[int]) -> int:
    """The table key of a multiset of evaluation classes."""
    return sum(_CLASS_WEIGHT[c] for c in classes)


class Evaluator:
    """Table-driven evaluation under one set of house rules.

    Cheap to build: the table is shared by every evaluator of the same setting of the rules
    that change evaluation (``tie``, ``payout`` and ``suited_double`` only matter to
    settlement), and filled as hands are seen, so one hand costs one search, not the 8,568 of
    the whole table, while millions of hands cost a look-up each.
    """

    def __init__(self, rules: HouseRules) -> None:
        self.rules = rules
        self._readings = _readings_table(
            rules.ten_is_duke, rules.three_six_pair, rules.trips_make_ox, rules.five_small
        )
        self._ranks = _ranks_table(
            rules.ten_is_duke, rules.three_six_pair, rules.trips_make_ox, rules.five_small
        )

    def rank(self, cards: Sequence[Card]) -> HandRank:
        """The rank of five cards: the fast path, one table look-up."""
        try:
            a, b, c, d, e = cards
        except ValueError:
            raise _wrong_size(cards) from None
        if (a.bit | b.bit | c.bit | d.bit | e.bit).bit_count() != HAND_SIZE:
            check_copies(cards, self.rules.decks)
        weight = _CARD_WEIGHT
        return self._ranks[
            weight[a.index] + weight[b.index] + weight[c.index] + weight[d.index] + weight[e.index]
        ]

    def rank_of_classes(self, classes: Sequence[int]) -> HandRank:
        """The rank of any hand made of these five evaluation classes."""
        return self._ranks[multiset_key(classes)]

    def evaluate(self, cards: Sequence[Card]) -> Evaluation:
        """The full evaluation of five cards, with the ox and power cards that made it."""
        hand = tuple(cards)
        self.rank(hand)  # validates
        # The table reading is for the hand sorted by class; map its positions back to ours.
        order = sorted(range(HAND_SIZE), key=lambda i: evaluation_class(hand[i]))
        reading = self._readings[multiset_key([evaluation_class(hand[i]) for i in order])]
        points = [0] * HAND_SIZE
        for sorted_position, position in enumerate(order):
            points[position] = reading.points[sorted_position]
        return Evaluation(
            cards=hand,
            rank=reading.rank,
            ox=tuple(hand[i] for i in sorted(order[i] for i in reading.ox)),
            power=tuple(hand[i] for i in sorted(order[i] for i in reading.power)),
            points=tuple(points),
            nenku=reading.nenku,
        )


def multiset_classes(key: int) -> tuple[int, ...]:
    """The sorted evaluation classes of a table key: the inverse of :func:`multiset_key`.

    >>> multiset_classes(multiset_key([13, 0, 5, 5, 1]))
    (0, 1, 5, 5, 13)
    """
    classes: list[int] = []
    for class_id in range(_CLASS_COUNT):
        key, count = divmod(key, 6)
        classes += [class_id] * count
    return tuple(classes)


class _Readings(dict[int, Reading]):
    """The reference search's reading of each multiset of five evaluation classes, searched
    the first time it is asked for (a plain dict look-up after that)."""

    def __init__(self, search: OxSearch) -> None:
        super().__init__()
        self._search = search

    def __missing__(self, key: int) -> Reading:
        reading = self._search.read([class_representative(c) for c in multiset_classes(key)])
        self[key] = reading
        return reading


class _Ranks(dict[int, HandRank]):
    """The rank of each multiset, from :class:`_Readings`, filled the same way."""

    def __init__(self, readings: _Readings) -> None:
        super().__init__()
        self._readings = readings

    def __missing__(self, key: int) -> HandRank:
        rank = self[key] = self._readings[key].rank
        return rank


@functools.cache
def _readings_table(
    ten_is_duke: bool, three_six_pair: bool, trips_make_ox: bool, five_small: bool
) -> _Readings:
    return _Readings(
        OxSearch(
            HouseRules(
                ten_is_duke=ten_is_duke,
                three_six_pair=three_six_pair,
                trips_make_ox=trips_make_ox,
                five_small=five_small,
            )
        )
    )


@functools.cache
def _ranks_table(
    ten_is_duke: bool, three_six_pair: bool, trips_make_ox: bool, five_small: bool
) -> _Ranks:
    return _Ranks(_readings_table(ten_is_duke, three_six_pair, trips_make_ox, five_small))


def _wrong_size(cards: Sequence[Card]) -> CardError:
    return CardError(f"a hand has exactly {HAND_SIZE} cards, got {len(cards)}")
