"""Exact counts of every heads-up deal, by the features settlement looks at.

A heads-up deal is an ordered pair (player's hand, dealer's hand) of disjoint five-card sets of
the physical cards in play. Settlement looks at three things of each hand (see docs/par.md):

- its rank, which depends only on the hand's *class multiset* (ranks, with the Ace of Spades a
  class of its own: :func:`~gnau_service.rules.evaluation.evaluation_class`);
- under ``tie=high_card``, its highest card: the top face is a class fact, the suit of the top
  card is not;
- under ``suited_double``, whether its five cards share one suit.

The counts come from the Möbius identity for disjoint sets, ``[P ∩ D = ∅] = Σ_{S ⊆ P ∩ D}
(-1)^|S|``, which turns the sum over disjoint pairs into a sum over the sets ``S`` of at most
five cards of products of "hands containing S" counts. Those depend only on the class multiset
of ``S``, so a few thousand class multisets stand in for millions of card sets. The suit facts
are exact conditional probabilities: given the class multisets of both hands, which physical
cards of each class they hold is uniform and independent from class to class.

The deck is a parameter (:class:`ClassPool`), so a test can compare the counts on a small deck
with a brute-force deal of every pair.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from gnau_service.rules.cards import Card, Rank, Suit, standard_deck
from gnau_service.rules.evaluation import (
    HAND_SIZE,
    Evaluator,
    class_multisets,
    class_representative,
    evaluation_class,
)
from gnau_service.rules.house_rules import HouseRules, TieRule
from gnau_service.rules.settlement import high_card

#: Evaluation classes: the Ace of Spades (0), the other aces (1), then 2 ... K (2-13).
CLASS_COUNT: Final = len(Rank) + 1
#: Suits by their high-card strength (0 weakest), as settlement's ``high_card`` orders them.
SUITS_BY_STRENGTH: Final = tuple(sorted(Suit, key=lambda suit: high_card([Card(Rank.ACE, suit)])))
_SUIT_STRENGTH: Final = {suit: strength for strength, suit in enumerate(SUITS_BY_STRENGTH)}
_FACE: Final = tuple(class_representative(c).face for c in range(CLASS_COUNT))

_K = TypeVar("_K")

#: A hand's key: (rank strength, top face, the hand's card counts in the top face's classes).
#: The last two are 0 and () unless the tie rule is high_card.
HandKey = tuple[int, int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ClassPool:
    """The physical cards in play, counted by evaluation class and, within a class, by suit.

    >>> pool = ClassPool.of(standard_deck(2))
    >>> pool.copies[0], pool.copies[1], pool.copies[13], pool.size
    (2, 6, 8, 104)
    """

    #: Physical cards of each class.
    copies: tuple[int, ...]
    #: Physical cards of each class by suit strength (``SUITS_BY_STRENGTH`` order).
    suit_copies: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, cards: Iterable[Card]) -> ClassPool:
        by_suit = [[0] * len(Suit) for _ in range(CLASS_COUNT)]
        for card in cards:
            by_suit[evaluation_class(card)][_SUIT_STRENGTH[card.suit]] += 1
        return cls(
            copies=tuple(sum(row) for row in by_suit),
            suit_copies=tuple(tuple(row) for row in by_suit),
        )

    @classmethod
    def decks(cls, decks: int) -> ClassPool:
        """The pool of ``decks`` standard decks."""
        return _standard_pool(decks)

    @property
    def size(self) -> int:
        return sum(self.copies)

    @property
    def pairs(self) -> int:
        """Ordered pairs of disjoint hands: every heads-up deal."""
        return math.comb(self.size, HAND_SIZE) * math.comb(self.size - HAND_SIZE, HAND_SIZE)


@functools.cache
def _standard_pool(decks: int) -> ClassPool:
    return ClassPool.of(standard_deck(decks))


@dataclass(frozen=True)
class DealCounts:
    """Counts of heads-up deals (player, dealer), each an exact integer.

    ``by_rank[(r, s)]``: player's rank strength ``r``, dealer's ``s``.
    ``suited_by_rank[(r, s)]``: one hand suited with strength ``r``, the other of strength ``s``
    (by the symmetry of a deal in its two hands, the same whichever seat the suited hand holds).
    ``equal_ranks[(r, f1, t1, f2, t2)]``: both of strength ``r``, the player's top face and
    top-class counts ``f1, t1``, the dealer's ``f2, t2`` (high_card only).
    ``suited_equal_ranks[(suit, r, f1, t1, f2, t2)]``: as above, the first hand suited in
    ``suit`` (a strength index), the second any (high_card with suited_double only).
    """

    pool: ClassPool
    total: int
    by_rank: dict[tuple[int, int], int]
    suited_by_rank: dict[tuple[int, int], int]
    equal_ranks: dict[tuple[int, int, tuple[int, ...], int, tuple[int, ...]], int]
    suited_equal_ranks: dict[tuple[int, int, int, tuple[int, ...], int, tuple[int, ...]], int]


@dataclass(frozen=True, slots=True)
class _Hand:
    """One class multiset of five cards that the pool can hold."""

    counts: tuple[int, ...]
    key: HandKey
    #: Physical hands with this class multiset.
    hands: int
    #: Of those, the hands whose five cards are all of one suit, by suit strength.
    suited: tuple[int, ...]


def deal_counts(rules: HouseRules, pool: ClassPool) -> DealCounts:
    """Count every heads-up deal from ``pool`` by what settlement under ``rules`` looks at."""
    high = rules.tie is TieRule.HIGH_CARD
    hands = list(_hands(rules, pool, track_top=high))
    containing = _containing(hands, pool)
    suited_containing = _suited_containing(hands) if rules.suited_double else {}

    by_rank: defaultdict[tuple[int, int], int] = defaultdict(int)
    suited_by_rank: defaultdict[tuple[int, int], int] = defaultdict(int)
    equal: defaultdict[tuple[int, int, tuple[int, ...], int, tuple[int, ...]], int]
    equal = defaultdict(int)
    suited_equal: defaultdict[tuple[int, int, int, tuple[int, ...], int, tuple[int, ...]], int]
    suited_equal = defaultdict(int)

    for subset, vector in containing.items():
        counts = _subset_counts(subset)
        sign = -1 if sum(counts) % 2 else 1
        weight = sign * math.prod(math.comb(pool.copies[c], k) for c, k in enumerate(counts) if k)
        ranks = _by_rank(vector)
        for first, first_count in ranks.items():
            scaled = weight * first_count
            for second, second_count in ranks.items():
                by_rank[first, second] += scaled * second_count
        if high:
            for first_key, first_count in vector.items():
                scaled = weight * first_count
                for second_key, second_count in vector.items():
                    if first_key[0] == second_key[0]:
                        equal[(first_key[0], *first_key[1:], *second_key[1:])] += (
                            scaled * second_count
                        )
        for suit, suited_vector in suited_containing.get(subset, {}).items():
            suited_ranks = _by_rank(suited_vector)
            for first, first_count in suited_ranks.items():
                for second, second_count in ranks.items():
                    suited_by_rank[first, second] += sign * first_count * second_count
            if high:
                for first_key, first_count in suited_vector.items():
                    for second_key, second_count in vector.items():
                        if first_key[0] == second_key[0]:
                            suited_equal[(suit, first_key[0], *first_key[1:], *second_key[1:])] += (
                                sign * first_count * second_count
                            )
    return DealCounts(
        pool=pool,
        total=pool.pairs,
        by_rank=_nonzero(by_rank),
        suited_by_rank=_nonzero(suited_by_rank),
        equal_ranks=_nonzero(equal),
        suited_equal_ranks=_nonzero(suited_equal),
    )


def _hands(rules: HouseRules, pool: ClassPool, *, track_top: bool) -> Iterator[_Hand]:
    """Every class multiset of five cards the pool holds, with its key and physical counts."""
    evaluator = Evaluator(rules)
    for classes in class_multisets():
        tally = Counter(classes)
        hands = math.prod(math.comb(pool.copies[c], k) for c, k in tally.items())
        if not hands:
            continue
        counts = tuple(tally.get(c, 0) for c in range(CLASS_COUNT))
        strength = evaluator.rank_of_classes(classes).strength
        key: HandKey = (strength, 0, ())
        if track_top:
            top = max(_FACE[c] for c in classes)
            key = (strength, top, tuple(counts[c] for c in top_classes(top)))
        suited = tuple(
            math.prod(math.comb(pool.suit_copies[c][suit], k) for c, k in tally.items())
            for suit in range(len(Suit))
        )
        yield _Hand(counts=counts, key=key, hands=hands, suited=suited)


def top_classes(face: int) -> tuple[int, ...]:
    """The evaluation classes of a face: both ace classes for 1, else the face's own class."""
    return tuple(c for c in range(CLASS_COUNT) if _FACE[c] == face)


def _sub_multisets(counts: Sequence[int]) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Every sub-multiset of a class multiset: its subset key and its counts per present class."""
    present = [c for c, k in enumerate(counts) if k]
    for chosen in itertools.product(*(range(counts[c] + 1) for c in present)):
        yield sum(k * 6**c for c, k in zip(present, chosen, strict=True)), chosen


def _subset_counts(subset: int) -> tuple[int, ...]:
    counts = []
    for _ in range(CLASS_COUNT):
        subset, count = divmod(subset, 6)
        counts.append(count)
    return tuple(counts)


def _containing(hands: Sequence[_Hand], pool: ClassPool) -> dict[int, dict[HandKey, int]]:
    """For each class multiset S of at most five cards: how many hands contain one fixed set of
    physical cards of that class multiset, by hand key (the same for every such set)."""
    table: defaultdict[int, defaultdict[HandKey, int]] = defaultdict(lambda: defaultdict(int))
    for hand in hands:
        present = [c for c, k in enumerate(hand.counts) if k]
        for subset, chosen in _sub_multisets(hand.counts):
            table[subset][hand.key] += math.prod(
                math.comb(pool.copies[c] - s, hand.counts[c] - s)
                for c, s in zip(present, chosen, strict=True)
            )
    return {subset: dict(vector) for subset, vector in table.items()}


def _suited_containing(hands: Sequence[_Hand]) -> dict[int, dict[int, dict[HandKey, int]]]:
    """For each class multiset S and suit: summed over the physical sets of class S, how many
    hands of one suit contain the set, by hand key (pairs of a suited hand and a subset of it)."""
    table: defaultdict[int, defaultdict[int, defaultdict[HandKey, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for hand in hands:
        if not any(hand.suited):
            continue
        present = [c for c, k in enumerate(hand.counts) if k]
        for subset, chosen in _sub_multisets(hand.counts):
            ways = math.prod(
                math.comb(hand.counts[c], s) for c, s in zip(present, chosen, strict=True)
            )
            for suit, suited in enumerate(hand.suited):
                if suited:
                    table[subset][suit][hand.key] += suited * ways
    return {
        subset: {suit: dict(vector) for suit, vector in by_suit.items()}
        for subset, by_suit in table.items()
    }


def _by_rank(vector: dict[HandKey, int]) -> dict[int, int]:
    ranks: defaultdict[int, int] = defaultdict(int)
    for key, count in vector.items():
        ranks[key[0]] += count
    return ranks


def _nonzero(table: Mapping[_K, int]) -> dict[_K, int]:
    return {key: count for key, count in table.items() if count}


@functools.lru_cache(maxsize=4096)
def top_suit_ways(
    top_suits: tuple[tuple[int, ...], ...],
    first: tuple[int, ...],
    second: tuple[int, ...],
    first_suit: int | None = None,
) -> dict[tuple[int, int], int]:
    """Ways two disjoint hands can hold their cards of the top face, by (first's best suit,
    second's best suit), suit strengths 0-3.

    ``top_suits`` gives the physical cards of each top-face class by suit; ``first`` and
    ``second`` the hands' card counts in those classes. With ``first_suit`` the first hand's
    cards are all of that suit (it is suited), and only the second's choices are counted.

    >>> ways = top_suit_ways(((1, 1, 1, 1),), (1,), (1,))
    >>> sum(ways.values()), sum(n for (a, b), n in ways.items() if a > b)
    (12, 6)
    """
    ways: defaultdict[tuple[int, int], int] = defaultdict(int)
    for first_pick, first_ways in _picks(top_suits, first, first_suit):
        rest = tuple(
            tuple(n - k for n, k in zip(row, picked, strict=True))
            for row, picked in zip(top_suits, first_pick, strict=True)
        )
        for second_pick, second_ways in _picks(rest, second, None):
            ways[_best_suit(first_pick), _best_suit(second_pick)] += first_ways * second_ways
    return dict(ways)


def _picks(
    suits: tuple[tuple[int, ...], ...], counts: tuple[int, ...], only_suit: int | None
) -> Iterator[tuple[tuple[tuple[int, ...], ...], int]]:
    """Every way to take ``counts[i]`` cards of class ``i`` by suit, with its number of ways."""
    per_class = []
    for row, count in zip(suits, counts, strict=True):
        options = []
        for split in _splits(count, len(row)):
            if only_suit is not None and split[only_suit] != count:
                continue
            ways = math.prod(math.comb(n, k) for n, k in zip(row, split, strict=True))
            if ways:
                options.append((split, ways))
        per_class.append(options)
    for combo in itertools.product(*per_class):
        yield tuple(split for split, _ in combo), math.prod(ways for _, ways in combo)


def _splits(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _splits(total - first, parts - 1):
            yield (first, *rest)


def _best_suit(pick: tuple[tuple[int, ...], ...]) -> int:
    return max(suit for split in pick for suit, k in enumerate(split) if k)
