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
from typing import Any, Final, TypeVar

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


_EqualKey = tuple[int, int, tuple[int, ...], int, tuple[int, ...]]
_SuitedEqualKey = tuple[int, int, int, tuple[int, ...], int, tuple[int, ...]]


@dataclass(frozen=True)
class DealCounts:
    """Counts of heads-up deals (player, dealer), each an exact integer.

    ``by_rank[(r, s)]``: the player's hand has rank strength ``r``, the dealer's ``s``.
    ``player_suited[(suit, r, s)]``: of those, the deals whose player's hand is suited in
    ``suit`` (a strength index); ``dealer_suited`` likewise for the dealer's hand
    (suited_double only).
    ``equal_ranks[(r, f1, t1, f2, t2)]``: both of strength ``r``, the player's top face and
    counts in its classes ``f1, t1``, the dealer's ``f2, t2`` (high_card only);
    ``player_suited_equal`` and ``dealer_suited_equal`` split them by a suited hand, keyed
    ``(suit, r, f1, t1, f2, t2)`` (high_card with suited_double only).
    """

    pool: ClassPool
    total: int
    by_rank: dict[tuple[int, int], int]
    player_suited: dict[tuple[int, int, int], int]
    dealer_suited: dict[tuple[int, int, int], int]
    equal_ranks: dict[_EqualKey, int]
    player_suited_equal: dict[_SuitedEqualKey, int]
    dealer_suited_equal: dict[_SuitedEqualKey, int]


@dataclass(frozen=True, slots=True)
class _Hand:
    """One class multiset of five cards that the pool can hold."""

    counts: tuple[int, ...]
    key: HandKey
    #: Physical hands with this class multiset.
    hands: int
    #: Of those, the hands whose five cards are all of one suit, by suit strength.
    suited: tuple[int, ...]


_Vector = dict[HandKey, int]


@dataclass(frozen=True)
class _Tables:
    """The "hands containing a set" tables of one rule set and pool (see :func:`_tables`)."""

    hands: tuple[_Hand, ...]
    containing: dict[int, _Vector]
    suited_containing: dict[int, dict[int, _Vector]]
    #: ``containing`` summed by rank, and the hands by class counts, for the inner loops.
    containing_ranks: dict[int, dict[int, int]]
    by_counts: dict[tuple[int, ...], _Hand]


def deal_counts(
    rules: HouseRules, pool: ClassPool, *, dealer: tuple[int, ...] | None = None
) -> DealCounts:
    """Count every heads-up deal from ``pool`` by what settlement under ``rules`` looks at;
    with ``dealer`` (class counts), only the deals whose dealer's hand has that class multiset.
    """
    high = rules.tie is TieRule.HIGH_CARD
    tables = _tables(rules, pool)
    if dealer is None:
        sides = _dealer_sides(tables)
        total = pool.pairs
    else:
        hand = tables.by_counts[dealer]
        sides = _one_dealer_sides(hand, pool)
        total = hand.hands * math.comb(pool.size - HAND_SIZE, HAND_SIZE)

    by_rank: defaultdict[tuple[int, int], int] = defaultdict(int)
    player_suited: defaultdict[tuple[int, int, int], int] = defaultdict(int)
    dealer_suited: defaultdict[tuple[int, int, int], int] = defaultdict(int)
    equal: defaultdict[_EqualKey, int] = defaultdict(int)
    player_suited_equal: defaultdict[_SuitedEqualKey, int] = defaultdict(int)
    dealer_suited_equal: defaultdict[_SuitedEqualKey, int] = defaultdict(int)

    for subset, (per_set, suited_sets) in sides:
        counts = _subset_counts(subset)
        sign = -1 if sum(counts) % 2 else 1
        physical_sets = math.prod(math.comb(pool.copies[c], k) for c, k in enumerate(counts) if k)
        players = tables.containing[subset]
        player_ranks = tables.containing_ranks[subset]
        _outer(
            by_rank,
            players,
            per_set,
            weight=sign * physical_sets,
            equal=equal if high else None,
            player_ranks=player_ranks,
        )
        if rules.suited_double:
            for suit, suited in tables.suited_containing.get(subset, {}).items():
                _outer(
                    player_suited,
                    suited,
                    per_set,
                    suit=suit,
                    weight=sign,
                    equal=player_suited_equal if high else None,
                )
            for suit, suited in suited_sets.items():
                _outer(
                    dealer_suited,
                    players,
                    suited,
                    suit=suit,
                    weight=sign,
                    equal=dealer_suited_equal if high else None,
                    player_ranks=player_ranks,
                )
    return DealCounts(
        pool=pool,
        total=total,
        by_rank=_nonzero(by_rank),
        player_suited=_nonzero(player_suited),
        dealer_suited=_nonzero(dealer_suited),
        equal_ranks=_nonzero(equal),
        player_suited_equal=_nonzero(player_suited_equal),
        dealer_suited_equal=_nonzero(dealer_suited_equal),
    )


def _outer(
    by_rank: defaultdict[Any, int],
    players: _Vector,
    dealers: _Vector,
    *,
    suit: int | None = None,
    weight: int,
    equal: defaultdict[Any, int] | None,
    player_ranks: dict[int, int] | None = None,
) -> None:
    """Add ``weight`` times the outer product of a player-side and a dealer-side vector, by
    rank, and (``equal``) by full key where the ranks are equal. ``player_ranks`` is
    ``players`` summed by rank, if the caller has it."""
    prefix = () if suit is None else (suit,)
    if player_ranks is None:
        player_ranks = _by_rank(players)
    for dealer_rank, dealer_count in _by_rank(dealers).items():
        scaled = weight * dealer_count
        for player_rank, player_count in player_ranks.items():
            by_rank[(*prefix, player_rank, dealer_rank)] += scaled * player_count
    if equal is None:
        return
    for dealer_key, dealer_count in dealers.items():
        scaled = weight * dealer_count
        for player_key, player_count in players.items():
            if player_key[0] == dealer_key[0]:
                equal[(*prefix, player_key[0], *player_key[1:], *dealer_key[1:])] += (
                    scaled * player_count
                )


def _dealer_sides(tables: _Tables) -> Iterator[tuple[int, tuple[_Vector, dict[int, _Vector]]]]:
    """For every class multiset S: the dealer hands containing one physical set of class S (by
    key), and the suited dealer hands summed over every such set (by suit, then key)."""
    for subset, vector in tables.containing.items():
        yield subset, (vector, tables.suited_containing.get(subset, {}))


def _one_dealer_sides(
    hand: _Hand, pool: ClassPool
) -> Iterator[tuple[int, tuple[_Vector, dict[int, _Vector]]]]:
    """As :func:`_dealer_sides`, for the dealer hands of one class multiset only."""
    present = [c for c, k in enumerate(hand.counts) if k]
    for subset, chosen in _sub_multisets(hand.counts):
        per_set = math.prod(
            math.comb(pool.copies[c] - s, hand.counts[c] - s)
            for c, s in zip(present, chosen, strict=True)
        )
        sets_in_hand = math.prod(
            math.comb(hand.counts[c], s) for c, s in zip(present, chosen, strict=True)
        )
        suited = {
            suit: {hand.key: count * sets_in_hand}
            for suit, count in enumerate(hand.suited)
            if count
        }
        yield subset, ({hand.key: per_set}, suited)


@functools.lru_cache(maxsize=64)
def _tables(rules: HouseRules, pool: ClassPool) -> _Tables:
    high = rules.tie is TieRule.HIGH_CARD
    hands = tuple(_hands(rules, pool, track_top=high))
    containing = _containing(hands, pool)
    return _Tables(
        hands=hands,
        containing=containing,
        suited_containing=_suited_containing(hands) if rules.suited_double else {},
        containing_ranks={subset: _by_rank(vector) for subset, vector in containing.items()},
        by_counts={hand.counts: hand for hand in hands},
    )


def dealer_class_multisets(rules: HouseRules, pool: ClassPool) -> tuple[tuple[int, ...], ...]:
    """Every class multiset a hand from ``pool`` can have (counts per class)."""
    return tuple(hand.counts for hand in _tables(rules, pool).hands)


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


@functools.lru_cache(maxsize=16384)
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
