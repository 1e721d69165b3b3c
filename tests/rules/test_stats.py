import collections
import itertools
import math

import pytest

from gnau_service.rules.cards import standard_deck
from gnau_service.rules.evaluation import ALL_HAND_RANKS, Category, Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.stats import hand_stats

EVALUATION_RULES = [
    HouseRules(ten_is_duke=a, three_six_pair=b, trips_make_ox=c, five_small=d)
    for a, b, c, d in itertools.product((False, True), repeat=4)
]


def brute_force_counts(rules: HouseRules) -> dict[str, int]:
    rank = Evaluator(rules).rank
    counts = collections.Counter(map(rank, itertools.combinations(standard_deck(), 5)))
    return {hand_rank.label: count for hand_rank, count in counts.items()}


def test_counts_of_the_default_rules_match_brute_force() -> None:
    stats = hand_stats(HouseRules())
    assert stats.total == math.comb(52, 5) == 2_598_960
    assert {label: n for label, n in stats.values.items() if n} == brute_force_counts(HouseRules())


@pytest.mark.slow
@pytest.mark.parametrize("rules", EVALUATION_RULES[1:], ids=str)
def test_counts_of_every_evaluation_setting_match_brute_force(rules: HouseRules) -> None:
    stats = hand_stats(rules)
    assert {label: n for label, n in stats.values.items() if n} == brute_force_counts(rules)


@pytest.mark.parametrize("decks", [1, 2, 3, 8])
def test_total_is_every_set_of_five_physical_cards(decks: int) -> None:
    assert hand_stats(HouseRules(decks=decks)).total == math.comb(52 * decks, 5)


def test_counts_that_follow_from_simple_combinatorics() -> None:
    # Five Dukes: 5 of the 12 J/Q/K (16 with tens); Five Small: 5 of the 16 A-4.
    default = hand_stats(HouseRules()).categories
    assert default["FIVE_DUKES"] == math.comb(12, 5)
    assert default["FIVE_SMALL"] == math.comb(16, 5)
    assert hand_stats(HouseRules(ten_is_duke=True)).categories["FIVE_DUKES"] == math.comb(16, 5)
    assert hand_stats(HouseRules(five_small=False)).categories["FIVE_SMALL"] == 0
    two_decks = hand_stats(HouseRules(decks=2)).categories
    assert two_decks["FIVE_DUKES"] == math.comb(24, 5)


def test_every_rank_is_listed_best_first() -> None:
    stats = hand_stats(HouseRules())
    assert list(stats.by_rank) == sorted(ALL_HAND_RANKS, reverse=True)
    assert list(stats.categories) == [str(c) for c in reversed(Category)]
    assert sum(stats.values.values()) == stats.total
