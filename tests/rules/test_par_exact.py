"""The PAR sheet's exact counts against brute force: every ordered pair of disjoint hands of a
small deck, each settled by the real settlement code, tallied by outcome."""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.rules.cards import Card, parse_cards, standard_deck
from gnau_service.rules.evaluation import Category, Evaluation, Evaluator
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from gnau_service.rules.par_counts import ClassPool
from gnau_service.rules.par_outcomes import Resolution, deal_outcomes
from gnau_service.rules.settlement import Outcome, PlayerHand, compare, payout_units, settle
from tests.rules.strategies import house_rules

Key = tuple[Outcome, str, Resolution, bool]

# Spades enough for suited hands, Ngau Tonku (AS with a Duke), Five Dukes (five of J/Q/K, six
# with the ten), Five Small (A A 2 3 4 from AS AH 2C 3S 4D), 3s and 6s.
ONE_DECK = parse_cards("AS KS QS JS TS 3S 6S AH KH QH 4D 2C")
# Two decks' worth: identical cards (two KH, two AS), suited pairs, equal high cards.
TWO_DECKS = parse_cards("AS AS KH KH QH JH 3H 6H 6C 2C 2C 4D")


def brute_force(rules: HouseRules, deck: Sequence[Card]) -> dict[Key, tuple[int, int]]:
    """Settle every ordered pair of disjoint hands: (deals, player's result) by outcome."""
    tally: collections.Counter[Key] = collections.Counter()
    units: dict[Key, int] = {}
    positions = range(len(deck))
    for player in itertools.combinations(positions, 5):
        rest = [i for i in positions if i not in player]
        player_cards = tuple(deck[i] for i in player)
        for dealer in itertools.combinations(rest, 5):
            table = settle([deck[i] for i in dealer], [PlayerHand(1, player_cards, 1)], rules)
            seat = table.seats[0]
            key = _classify(rules, seat.outcome, seat.evaluation, table.dealer)
            tally[key] += 1
            assert units.setdefault(key, seat.delta) == seat.delta
    return {key: (deals, units[key]) for key, deals in tally.items()}


def _classify(rules: HouseRules, outcome: Outcome, player: Evaluation, dealer: Evaluation) -> Key:
    """The outcome's row, read off the two evaluations as the rules page describes it."""
    if player.category is Category.FIVE_DUKES and dealer.category is Category.FIVE_DUKES:
        return (outcome, player.rank.label, Resolution.FIVE_DUKES, False)
    if player.rank != dealer.rank:
        resolution = Resolution.HIGHER_HAND
    else:
        resolution = {
            TieRule.PUSH: Resolution.PUSH,
            TieRule.DEALER: Resolution.EQUAL_TO_DEALER,
            TieRule.HIGH_CARD: Resolution.HIGH_CARD,
        }[rules.tie]
    winner = player if outcome is Outcome.WIN else dealer
    suited = (
        outcome is not Outcome.TIE
        and rules.suited_double
        and len({card.suit for card in winner.cards}) == 1
    )
    return (outcome, winner.rank.label, resolution, suited)


def exact(rules: HouseRules, deck: Sequence[Card]) -> dict[Key, tuple[int, int]]:
    return {
        (row.outcome, row.hand.label, row.resolution, row.suited): (row.deals, row.units)
        for row in deal_outcomes(rules, ClassPool.of(deck))
    }


RULE_SETS = [
    HouseRules(decks=2),
    HouseRules(decks=2, tie=TieRule.PUSH),
    HouseRules(decks=2, tie=TieRule.HIGH_CARD),
    HouseRules(decks=2, suited_double=True),
    HouseRules(decks=2, suited_double=True, tie=TieRule.HIGH_CARD, ten_is_duke=True),
    HouseRules(decks=2, three_six_pair=True, trips_make_ox=False, five_small=False),
    HouseRules(decks=2, payout=PayoutTable.MULTIPLIER, tie=TieRule.HIGH_CARD),
]


@pytest.mark.parametrize(
    ("rules", "deck"),
    [(rules, TWO_DECKS) for rules in RULE_SETS] + [(rules, ONE_DECK) for rules in RULE_SETS[:5]],
    ids=lambda value: str(value.as_dict()) if isinstance(value, HouseRules) else str(len(value)),
)
def test_exact_counts_equal_brute_force(rules: HouseRules, deck: Sequence[Card]) -> None:
    expected = brute_force(rules, deck)
    assert sum(deals for deals, _ in expected.values()) == (
        math.comb(len(deck), 5) * math.comb(len(deck) - 5, 5)
    )
    assert exact(rules, deck) == expected


@settings(max_examples=20, deadline=None)
@given(
    rules=house_rules(st.just(2)),
    deck=st.lists(
        st.sampled_from(standard_deck(2)[:13] + standard_deck(2)[39:52]),
        min_size=10,
        max_size=11,
    ).filter(lambda cards: max(collections.Counter(cards).values()) <= 2),
)
def test_exact_counts_equal_brute_force_for_any_rules_and_small_deck(
    rules: HouseRules, deck: list[Card]
) -> None:
    """Clubs and spades only, up to two copies a card: suited hands, pairs and equal top cards
    are common."""
    assert exact(rules, deck) == brute_force(rules, deck)


@pytest.mark.slow
@pytest.mark.parametrize("tie", list(TieRule))
def test_twenty_card_deck_equals_brute_force_to_the_last_count(tie: TieRule) -> None:
    deck = parse_cards("AS KS QS JS TS 6S 3S AH KH QH JH 6H 4H 2C 3C 5C 9C 7D 4D 8D")
    _assert_large_brute_force(HouseRules(tie=tie, suited_double=True), deck)


def _assert_large_brute_force(rules: HouseRules, deck: Sequence[Card]) -> None:
    """Every pair compared by settlement's ``compare`` and priced by ``payout_units``, on
    evaluations made once per hand (settling 46.6 million tables one by one takes too long)."""
    evaluator = Evaluator(rules)
    positions = range(len(deck))
    evaluations = {
        hand: evaluator.evaluate([deck[i] for i in hand])
        for hand in itertools.combinations(positions, 5)
    }
    result: collections.Counter[tuple[Outcome, int]] = collections.Counter()
    for player, player_eval in evaluations.items():
        rest = [i for i in positions if i not in player]
        for dealer in itertools.combinations(rest, 5):
            dealer_eval = evaluations[dealer]
            outcome = compare(player_eval, dealer_eval, rules)
            units = 0
            if outcome is Outcome.WIN:
                units = payout_units(player_eval, rules)
            elif outcome is Outcome.LOSE:
                units = -payout_units(dealer_eval, rules)
            result[outcome, units] += 1
    expected: collections.Counter[tuple[Outcome, int]] = collections.Counter()
    for row in deal_outcomes(rules, ClassPool.of(deck)):
        expected[row.outcome, row.units] += row.deals
    assert result == expected
