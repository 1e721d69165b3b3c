"""The numpy batch evaluator and heads-up settlement against the scalar rules, hand by hand:
on hypothesis' hands under every house-rule set, and on many random deals per evaluation
setting."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.rules.batch import BatchEvaluator, high_cards, suited
from gnau_service.rules.cards import Card, parse_cards, standard_deck
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import Outcome, PlayerHand, high_card, settle
from gnau_service.rules.simulation import deal_heads_up, settle_heads_up, shoe_cards
from tests.rules.strategies import house_rules
from tests.rules.test_settlement import SETTLEMENTS

RULES = house_rules(st.integers(1, 3))
#: The 16 settings of the rules that change evaluation.
EVALUATION_SETTINGS = [
    HouseRules(ten_is_duke=a, three_six_pair=b, trips_make_ox=c, five_small=d, decks=2)
    for a, b, c, d in itertools.product((False, True), repeat=4)
]
_OUTCOME_CODE = {Outcome.WIN: 1, Outcome.TIE: 0, Outcome.LOSE: -1}


def indices(cards: tuple[Card, ...] | list[Card]) -> list[int]:
    return [card.index for card in cards]


def table(*hands: tuple[Card, ...] | list[Card]) -> np.ndarray:
    return np.array([indices(hand) for hand in hands], dtype=np.intp)


def physical_deals(decks: int) -> st.SearchStrategy[list[Card]]:
    """Ten distinct physical cards of ``decks`` decks (identical cards possible from two)."""
    shoe = standard_deck(decks)
    return st.lists(st.integers(0, len(shoe) - 1), min_size=10, max_size=10, unique=True).map(
        lambda positions: [shoe[p] for p in positions]
    )


@given(RULES, st.data())
def test_batch_strengths_equal_the_scalar_evaluator(rules: HouseRules, data: st.DataObject) -> None:
    deals = data.draw(st.lists(physical_deals(rules.decks), min_size=1, max_size=20))
    hands = [deal[:5] for deal in deals] + [deal[5:] for deal in deals]
    scalar = [Evaluator(rules).rank(hand).strength for hand in hands]
    assert BatchEvaluator(rules).strengths(table(*hands)).tolist() == scalar


@given(RULES, st.lists(physical_deals(3), min_size=1, max_size=20))
def test_heads_up_settlement_equals_settle(rules: HouseRules, deals: list[list[Card]]) -> None:
    deals = [deal for deal in deals if max(deal.count(card) for card in deal) <= rules.decks]
    if not deals:
        return
    settled = settle_heads_up(
        table(*(deal[:5] for deal in deals)), table(*(deal[5:] for deal in deals)), rules
    )
    for i, deal in enumerate(deals):
        (seat,) = settle(deal[5:], [PlayerHand(1, tuple(deal[:5]), 1)], rules).seats
        assert (int(settled.outcomes[i]), int(settled.deltas[i])) == (
            _OUTCOME_CODE[seat.outcome],
            seat.delta,
        )


def setting_id(rules: HouseRules) -> str:
    flags = (rules.ten_is_duke, rules.three_six_pair, rules.trips_make_ox, rules.five_small)
    return "".join("1" if flag else "0" for flag in flags)


@pytest.mark.parametrize("rules", EVALUATION_SETTINGS, ids=setting_id)
def test_batch_strengths_on_many_random_hands(rules: HouseRules) -> None:
    """20,000 deals (40,000 hands) per evaluation setting, from two decks, hand by hand."""
    player, dealer = deal_heads_up(np.random.default_rng(14), 20_000, shoe_cards(2))
    evaluator, deck = Evaluator(rules), standard_deck()
    for hands in (player, dealer):
        scalar = [evaluator.rank([deck[i] for i in hand]).strength for hand in hands.tolist()]
        assert BatchEvaluator(rules).strengths(hands).tolist() == scalar


@pytest.mark.parametrize(
    ("cards", "strength"),
    [
        ("3C 6S 8H 4H 8C", 18),  # Double-Ox 8
        ("KD 4C 3S AS QC", 24),  # Ngau Tonku
        ("KD 4C 3S AD QC", 1),  # Nenku: Single-Ox 1
        ("4D 4C 3S 8D 5D", 0),  # No Ox
        ("KC 7S 3H JH 7C", 10),  # Single-Ox 0, the 3 counted as 6
        ("3D 4C 3S AS 2C", 25),  # Five Small
        ("KD JH QS JD QC", 26),  # Five Dukes
    ],
)
def test_known_hands(cards: str, strength: int) -> None:
    hand = parse_cards(cards)
    # Every order of the same five cards reads the same.
    orders = table(*itertools.permutations(hand))
    assert set(BatchEvaluator(HouseRules()).strengths(orders).tolist()) == {strength}


def test_suits_and_high_cards() -> None:
    hands = [parse_cards("KH QH JH 7H 2H"), parse_cards("KH QH JH 7H 2S"), parse_cards("AS 2D")]
    assert suited(table(*hands[:2])).tolist() == [True, False]
    assert (
        high_cards(table(*hands[:2])).tolist()
        == [
            high_card(hands[0])[0] * 4 + high_card(hands[0])[1],
        ]
        * 2
    )
    ace_of_spades, two_of_diamonds = table(hands[2][:1]), table(hands[2][1:])
    assert high_cards(two_of_diamonds)[0] > high_cards(ace_of_spades)[0]  # rank before suit


def test_a_hand_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
        BatchEvaluator(HouseRules()).strengths(np.zeros((3, 4), dtype=np.intp))


@settings(max_examples=20)
@given(st.integers(2, 30), st.integers(0, 2**32))
def test_deals_are_ten_distinct_physical_cards(rounds: int, seed: int) -> None:
    shoe = np.arange(104, dtype=np.intp)  # positions as their own labels
    player, dealer = deal_heads_up(np.random.default_rng(seed), rounds, shoe)
    both = np.concatenate([player, dealer], axis=1)
    assert both.shape == (rounds, 10)
    assert all(len(set(row)) == 10 for row in both.tolist())
    assert both.min() >= 0 and both.max() < 104


@pytest.mark.parametrize(("dealer", "player", "rules", "outcome", "delta"), SETTLEMENTS)
def test_heads_up_settlement_of_the_worked_examples(
    dealer: str, player: str, rules: dict[str, object], outcome: Outcome, delta: int
) -> None:
    """The settlement examples of test_settlement.py (stake 10 there, 1 here)."""
    settled = settle_heads_up(
        table(parse_cards(player)), table(parse_cards(dealer)), HouseRules.from_mapping(rules)
    )
    assert (int(settled.outcomes[0]), int(settled.deltas[0]) * 10) == (
        _OUTCOME_CODE[outcome],
        delta,
    )
