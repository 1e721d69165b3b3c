import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.rules.cards import Card, parse_cards, standard_deck
from gnau_service.rules.errors import CardError, SettlementError
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import Outcome, PlayerHand, compare, settle
from tests.rules.strategies import house_rules

DEALER_SINGLE_3 = "KD 4C 3S 8D 5D"  # Single-Ox 3


def settle_one(
    dealer: str, player: str, stake: int = 10, **rules: object
) -> tuple[Outcome, int, int]:
    table = settle(
        parse_cards(dealer),
        [PlayerHand(1, parse_cards(player), stake)],
        HouseRules.from_mapping(rules),
    )
    (seat,) = table.seats
    return seat.outcome, seat.delta, table.dealer_delta


# (dealer, player, house rules, outcome, player delta with stake 10)
SETTLEMENTS = [
    # Player beats the dealer: the dealer pays stake x table[player's category].
    (DEALER_SINGLE_3, "3C 6S 8H 4H 8C", {}, Outcome.WIN, 20),  # Double-Ox 8, points 2
    (DEALER_SINGLE_3, "3C 6S 8H 4H 8C", {"payout": "multiplier"}, Outcome.WIN, 30),
    (DEALER_SINGLE_3, "KH 4D 3H AS QC", {}, Outcome.WIN, 50),  # Ngau Tonku
    (DEALER_SINGLE_3, "3H 4H 3C AH 2C", {}, Outcome.WIN, 100),  # Five Small
    (DEALER_SINGLE_3, "3H 4H 3C AH 2C", {"payout": "multiplier"}, Outcome.WIN, 70),
    (DEALER_SINGLE_3, "KC JH TS JD QC", {"ten_is_duke": True}, Outcome.WIN, 100),  # Five Dukes
    # Player cannot beat the dealer: pays stake x table[dealer's category].
    ("3C 6S 8H 4H 8C", DEALER_SINGLE_3, {}, Outcome.LOSE, -20),
    ("3C 6S 8H 4H 8C", DEALER_SINGLE_3, {"payout": "multiplier"}, Outcome.LOSE, -30),
    ("4D 4C 3S 8D 5D", "4H 4S 3C 8C 5H", {}, Outcome.LOSE, 0),  # No Ox dealer takes 0
    # Equal hands: the dealer by default, a tie under push, the high card under high_card.
    (DEALER_SINGLE_3, "KH 4H 3H 8H 5H", {}, Outcome.LOSE, -10),
    (DEALER_SINGLE_3, "KH 4H 3H 8H 5H", {"tie": "push"}, Outcome.TIE, 0),
    (DEALER_SINGLE_3, "KH 4H 3H 8H 5H", {"tie": "high_card"}, Outcome.WIN, 10),  # KH > KD
    (DEALER_SINGLE_3, "KC 4H 3H 8H 5H", {"tie": "high_card"}, Outcome.WIN, 10),  # KC > KD
    ("KS 4C 3S 8D 5D", "KH 4H 3H 8H 5H", {"tie": "high_card"}, Outcome.LOSE, -10),  # KS > KH
    ("KH 4C 3S 8D 5D", "KD 4H 3H 8H 5H", {"tie": "high_card", "decks": 2}, Outcome.LOSE, -10),
    # Five Dukes against Five Dukes is a tie under every tie rule.
    ("KD QD JD KS QS", "KC QC JC KH QH", {}, Outcome.TIE, 0),
    ("KD QD JD KS QS", "KC QC JC KH QH", {"tie": "high_card"}, Outcome.TIE, 0),
    ("KD QD JD KS QS", "KC QC JC KH QH", {"tie": "push"}, Outcome.TIE, 0),
    # A winning suited hand is paid double under suited_double.
    ("4D 4C 3S 8D 5D", "KH QH JH 7H 2H", {}, Outcome.WIN, 10),  # Single-Ox 9
    ("4D 4C 3S 8D 5D", "KH QH JH 7H 2H", {"suited_double": True}, Outcome.WIN, 20),
    ("KH QH JH 7H 2H", DEALER_SINGLE_3, {"suited_double": True}, Outcome.LOSE, -20),
    (DEALER_SINGLE_3, "KH 4H 3H 8S 5H", {"suited_double": True}, Outcome.LOSE, -10),
]


@pytest.mark.parametrize(("dealer", "player", "rules", "outcome", "delta"), SETTLEMENTS)
def test_settlement_table(
    dealer: str, player: str, rules: dict[str, object], outcome: Outcome, delta: int
) -> None:
    assert settle_one(dealer, player, 10, **rules) == (outcome, delta, -delta)


def test_every_player_settles_against_the_dealer_not_each_other() -> None:
    table = settle(
        parse_cards(DEALER_SINGLE_3),
        [
            PlayerHand(7, parse_cards("3C 6S 8H 4H 8C"), 5),  # Double-Ox 8 wins 10
            PlayerHand(2, parse_cards("4D 4S 3D 8S 5C"), 300),  # No Ox pays 300
            PlayerHand(4, parse_cards("KS QS JH 7H AC"), 11),  # Single-Ox 8 wins 11
        ],
        HouseRules(),
    )
    assert [(s.seat, s.outcome, s.delta) for s in table.seats] == [
        (2, Outcome.LOSE, -300),
        (4, Outcome.WIN, 11),
        (7, Outcome.WIN, 10),
    ]
    assert table.dealer_delta == 279


@pytest.mark.parametrize(
    ("players", "error", "message"),
    [
        ([], SettlementError, "at least one player"),
        ([PlayerHand(0, parse_cards("3C 6S 8H 4H 8C"), 5)], SettlementError, "positive integer"),
        (
            [PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), 5)] * 2,
            SettlementError,
            "seat 1 appears twice",
        ),
        ([PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), 0)], SettlementError, "got 0"),
        ([PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), -5)], SettlementError, "got -5"),
        ([PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), True)], SettlementError, "got True"),
        ([PlayerHand(1, parse_cards("3C 6S 8H 4H 8C"), 2.5)], SettlementError, "got 2.5"),  # type: ignore[arg-type]
        ([PlayerHand(1, parse_cards("KD 6S 8H 4H 8C"), 5)], CardError, "KD appears 2 times"),
        ([PlayerHand(1, parse_cards("3C 6S 8H 4H"), 5)], CardError, "exactly 5 cards"),
    ],
)
def test_tables_that_cannot_be_settled_are_refused(
    players: list[PlayerHand], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        settle(parse_cards(DEALER_SINGLE_3), players, HouseRules())


RULES = house_rules(st.integers(1, 3))


@given(RULES, st.data())
def test_settlement_conserves_money(rules: HouseRules, data: st.DataObject) -> None:
    seats = data.draw(st.integers(1, 10 * rules.decks - 1))
    deck = data.draw(st.permutations(standard_deck(rules.decks)))
    stakes = data.draw(st.lists(st.integers(1, 10**12), min_size=seats, max_size=seats))
    players = [
        PlayerHand(seat + 1, tuple(deck[5 * seat + 5 : 5 * seat + 10]), stake)
        for seat, stake in enumerate(stakes)
    ]
    table = settle(deck[:5], players, rules)
    assert table.dealer_delta + sum(seat.delta for seat in table.seats) == 0
    for seat in table.seats:
        assert isinstance(seat.delta, int)
        assert seat.delta % seat.stake == 0
        # A No Ox hand may win (on high card) and be paid 0; a delta's sign never contradicts.
        if seat.delta > 0:
            assert seat.outcome is Outcome.WIN
        if seat.delta < 0:
            assert seat.outcome is Outcome.LOSE
        if seat.outcome is Outcome.TIE:
            assert seat.delta == 0


@given(RULES, st.lists(st.sampled_from(standard_deck()), min_size=5, max_size=5, unique=True))
def test_a_hand_never_beats_itself(rules: HouseRules, cards: list[Card]) -> None:
    evaluation = Evaluator(rules).evaluate(cards)
    assert compare(evaluation, evaluation, rules) is not Outcome.WIN
    twin = Evaluator(dataclasses.replace(rules, decks=2)).evaluate(cards)
    assert compare(twin, evaluation, rules) is not Outcome.WIN
