"""Exact frequencies of every hand rank over all five-card hands of the decks in play.

A hand here is a set of five of the ``52 x decks`` physical cards, so the counts are the
frequencies a fair deal produces: ``C(52 x decks, 5)`` hands in all. They are computed by
combinatorics, not by dealing: every multiset of five evaluation classes (ranks, with the Ace
of Spades apart) is evaluated once and weighted by the number of card sets that have it.

>>> stats = hand_stats(HouseRules())
>>> stats.total, stats.categories["FIVE_DUKES"], stats.categories["FIVE_SMALL"]
(2598960, 792, 4368)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from gnau_service.rules.cards import Rank, Suit
from gnau_service.rules.evaluation import (
    ALL_HAND_RANKS,
    Evaluator,
    HandRank,
    class_multisets,
    class_representative,
)
from gnau_service.rules.house_rules import HouseRules


@dataclass(frozen=True)
class HandStats:
    """How many of all ``total`` hands fall in each rank, best rank first."""

    rules: HouseRules
    total: int
    by_rank: dict[HandRank, int]

    @property
    def categories(self) -> dict[str, int]:
        """Counts by category name (``NO_OX`` ... ``FIVE_DUKES``), best first."""
        counts: Counter[str] = Counter()
        for rank, count in self.by_rank.items():
            counts[str(rank.category)] += count
        return dict(counts)

    @property
    def values(self) -> dict[str, int]:
        """Counts by rank label (``DOUBLE_OX:8``, ``SINGLE_OX:0``, ``NO_OX`` ...), best first."""
        return {rank.label: count for rank, count in self.by_rank.items()}


def hand_stats(rules: HouseRules) -> HandStats:
    """Count every hand rank over all ``C(52 x decks, 5)`` hands under ``rules``."""
    evaluator = Evaluator(rules)
    copies = [_copies_in_play(c, rules.decks) for c in range(len(Rank) + 1)]
    counts = dict.fromkeys(sorted(ALL_HAND_RANKS, reverse=True), 0)
    for classes in class_multisets():
        hands = math.prod(math.comb(copies[c], k) for c, k in Counter(classes).items())
        if hands:
            counts[evaluator.rank_of_classes(classes)] += hands
    return HandStats(rules=rules, total=sum(counts.values()), by_rank=counts)


def _copies_in_play(evaluation_class: int, decks: int) -> int:
    """How many physical cards of the decks belong to an evaluation class."""
    card = class_representative(evaluation_class)
    if card.rank is Rank.ACE:
        return decks if card.suit is Suit.SPADES else decks * (len(Suit) - 1)
    return decks * len(Suit)
