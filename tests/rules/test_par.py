"""Figures of the PAR sheet that follow from the rules without counting: symmetry, simple
combinatorics, and the relations between the sheet's own figures."""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.rules.cards import Card, parse_cards, standard_deck
from gnau_service.rules.evaluation import Category, evaluation_class
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from gnau_service.rules.par import par_sheet
from gnau_service.rules.par_counts import ClassPool
from gnau_service.rules.par_outcomes import Resolution, deal_outcomes
from gnau_service.rules.par_seats import seat_covariance
from gnau_service.rules.settlement import Outcome, PlayerHand, settle
from tests.rules.strategies import house_rules

RULES = house_rules(st.sampled_from([1, 2, 3]))


def deals(decks: int) -> int:
    return math.comb(52 * decks, 5) * math.comb(52 * decks - 5, 5)


@settings(max_examples=15, deadline=None)
@given(
    rules=RULES,
    deck=st.lists(st.sampled_from(standard_deck()), min_size=12, max_size=18, unique=True),
)
def test_a_game_symmetric_in_its_two_hands_returns_the_whole_stake(
    rules: HouseRules, deck: list[Card]
) -> None:
    """Under tie=push, and under tie=high_card without duplicate cards (no two top cards are
    equal), the winner of a deal is decided the same way whichever seat holds which hand and is
    paid by its own hand: swapping the two hands of a deal negates the player's result, and a
    deal and its swap are equally likely. So the player's expected result is exactly 0."""
    if rules.tie is TieRule.DEALER:
        rules = dataclasses.replace(rules, tie=TieRule.PUSH)
    outcomes = deal_outcomes(rules, ClassPool.of(deck))
    assert sum(row.probability * row.units for row in outcomes) == 0


def test_the_full_deck_is_symmetric_under_push_and_favours_the_dealer_otherwise() -> None:
    assert par_sheet(HouseRules(tie=TieRule.PUSH)).house_edge == 0
    assert par_sheet(HouseRules(tie=TieRule.HIGH_CARD)).house_edge == 0
    assert par_sheet(HouseRules()).house_edge > 0
    # With two decks identical top cards go to the dealer.
    assert par_sheet(HouseRules(tie=TieRule.HIGH_CARD, decks=2)).house_edge > 0


@pytest.mark.parametrize(
    "rules",
    [
        HouseRules(),
        HouseRules(suited_double=True),
        HouseRules(payout=PayoutTable.MULTIPLIER, ten_is_duke=True, three_six_pair=True),
    ],
    ids=str,
)
def test_every_deal_has_one_outcome_and_the_figures_agree(rules: HouseRules) -> None:
    sheet = par_sheet(rules)
    assert sheet.deals == deals(rules.decks)
    assert sum(row.probability for row in sheet.outcomes) == 1
    assert all(row.probability == Fraction(row.deals, sheet.deals) for row in sheet.outcomes)
    mean = sum(row.probability * row.units for row in sheet.outcomes)
    assert sheet.rtp == 1 + mean and sheet.house_edge == -mean
    assert sheet.variance == sum(row.probability * row.units**2 for row in sheet.outcomes) - mean**2
    assert sheet.standard_deviation == pytest.approx(math.sqrt(sheet.variance), rel=1e-15)
    assert sheet.hit_frequency == sum(row.probability for row in sheet.outcomes if row.units > 0)
    if not rules.suited_double:
        assert not any(row.suited for row in sheet.outcomes)


@pytest.mark.parametrize(("ten_is_duke", "dukes"), [(False, 12), (True, 16)])
def test_five_dukes_against_five_dukes_is_the_only_tie_under_the_dealer_rule(
    ten_is_duke: bool, dukes: int
) -> None:
    sheet = par_sheet(HouseRules(ten_is_duke=ten_is_duke))
    ties = [row for row in sheet.outcomes if row.outcome is Outcome.TIE]
    assert [(row.hand.category, row.resolution) for row in ties] == [
        (Category.FIVE_DUKES, Resolution.FIVE_DUKES)
    ]
    assert ties[0].deals == math.comb(dukes, 5) * math.comb(dukes - 5, 5)
    assert sheet.push_frequency == Fraction(ties[0].deals, deals(1))


def test_a_win_with_five_small_against_the_lone_better_hand() -> None:
    """Five Small loses only to Five Dukes and to an equal Five Small: with five_small=false no
    deal is won or lost with it."""
    without = par_sheet(HouseRules(five_small=False))
    assert not any(row.hand.category is Category.FIVE_SMALL for row in without.outcomes)
    default = par_sheet(HouseRules())
    small_wins = sum(
        row.deals
        for row in default.outcomes
        if row.outcome is Outcome.WIN and row.hand.category is Category.FIVE_SMALL
    )
    # Five Small hands: 5 of the 16 A-4; the dealer's hand beats or equals none of them unless it
    # is Five Dukes (5 of the 12 J/Q/K: disjoint) or Five Small from the 11 small cards left.
    assert small_wins == math.comb(16, 5) * (math.comb(47, 5) - math.comb(12, 5) - math.comb(11, 5))


def test_suited_hands_are_paid_double() -> None:
    sheet = par_sheet(HouseRules(suited_double=True))
    suited = [row for row in sheet.outcomes if row.suited]
    assert suited
    for row in suited:
        plain = next(
            other
            for other in sheet.outcomes
            if (other.outcome, other.hand, other.resolution, other.suited)
            == (row.outcome, row.hand, row.resolution, False)
        )
        assert row.units == 2 * plain.units


def test_seat_covariance_is_the_variance_of_the_dealer_class_means() -> None:
    """On a small deck: Var(E[X | dealer's class multiset]) from brute force over every deal."""
    deck = parse_cards("AS KS QS JS TS 3S 6S AH KH QH 4D 2C")
    rules = HouseRules(tie=TieRule.HIGH_CARD, suited_double=True)
    by_dealer: dict[tuple[int, ...], list[int]] = {}
    for dealer in itertools.combinations(deck, 5):
        rest = [card for card in deck if card not in dealer]
        key = tuple(sorted(evaluation_class(card) for card in dealer))
        for player in itertools.combinations(rest, 5):
            seat = settle(dealer, [PlayerHand(1, player, 1)], rules).seats[0]
            by_dealer.setdefault(key, []).append(seat.delta)
    total = sum(len(results) for results in by_dealer.values())
    means = {key: Fraction(sum(results), len(results)) for key, results in by_dealer.items()}
    mean = sum(Fraction(len(by_dealer[key]), total) * m for key, m in means.items())
    expected = sum(Fraction(len(by_dealer[key]), total) * m**2 for key, m in means.items())
    assert seat_covariance(rules, ClassPool.of(deck)) == expected - mean**2


@pytest.mark.slow
def test_the_dealer_over_several_seats() -> None:
    one = par_sheet(HouseRules())
    seven = par_sheet(HouseRules(), seats=7)
    assert seven.house_edge == one.house_edge and seven.variance == one.variance
    assert seven.dealer_expected == 7 * one.house_edge
    # Seats share the dealer's hand: their results move together.
    assert 0 < seven.seat_covariance < one.variance
    assert seven.dealer_variance == 7 * one.variance + 42 * seven.seat_covariance
    assert one.dealer_variance == one.variance


@pytest.mark.parametrize("seats", [0, 10, True])
def test_seats_that_do_not_fit_the_decks_are_refused(seats: int) -> None:
    with pytest.raises(ValueError, match="seats must be an integer from 1 to 9"):
        par_sheet(HouseRules(), seats=seats)
