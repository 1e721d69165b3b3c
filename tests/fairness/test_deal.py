"""The round-robin deal of the rules page, and the refusal of tables the decks cannot hold."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.fairness import CommittedRound, DealError, LockedSeat, deal_round_robin
from gnau_service.fairness.deal import HAND_SIZE, max_seats, require_hands_fit
from gnau_service.rules.cards import CARDS_PER_DECK, standard_deck
from gnau_service.rules.house_rules import MAX_DECKS, HouseRules
from tests.references import ref


@given(
    seat_numbers=st.sets(st.integers(1, 1000), min_size=1, max_size=9),
    decks=st.integers(1, 2),
)
def test_cards_go_one_at_a_time_seats_ascending_dealer_last(
    seat_numbers: set[int], decks: int
) -> None:
    deck = standard_deck(decks)
    deal = deal_round_robin(deck, seat_numbers)
    receivers: list[int | str] = [*sorted(seat_numbers), "dealer"]
    # Replay the deal card by card: pass by pass, each hand in turn.
    expected: dict[int | str, list[object]] = {receiver: [] for receiver in receivers}
    position = 0
    for _ in range(HAND_SIZE):
        for receiver in receivers:
            expected[receiver].append(deck[position])
            position += 1
    assert [hand.seat_number for hand in deal.seat_hands] == sorted(seat_numbers)
    for hand in deal.seat_hands:
        assert list(hand.cards) == expected[hand.seat_number]
        assert deal.hand_of(hand.seat_number) == hand.cards
    assert list(deal.dealer_hand) == expected["dealer"]
    assert deal.set_aside == deck[position:]


def test_a_concrete_two_seat_deal() -> None:
    deck = standard_deck()  # AC 2C 3C ... : easy to follow
    deal = deal_round_robin(deck, [2, 1])
    assert [str(card) for card in deal.hand_of(1)] == ["AC", "4C", "7C", "TC", "KC"]
    assert [str(card) for card in deal.hand_of(2)] == ["2C", "5C", "8C", "JC", "AD"]
    assert [str(card) for card in deal.dealer_hand] == ["3C", "6C", "9C", "QC", "2D"]
    assert len(deal.set_aside) == 52 - 15
    with pytest.raises(KeyError):
        deal.hand_of(3)


@pytest.mark.parametrize("decks", range(1, MAX_DECKS + 1))
def test_the_largest_table_fits_and_one_more_seat_is_refused(decks: int) -> None:
    most = max_seats(decks)
    assert HAND_SIZE * (most + 1) <= decks * CARDS_PER_DECK < HAND_SIZE * (most + 2)
    require_hands_fit(most, decks)
    with pytest.raises(DealError, match=f"{most + 1} seats and the dealer need") as raised:
        require_hands_fit(most + 1, decks)
    assert raised.value.field == "seats"


def test_nine_seats_fit_one_deck_and_ten_do_not() -> None:
    assert max_seats(1) == 9
    committed = CommittedRound("r", HouseRules(), bytes(32))
    committed.lock([LockedSeat(n, ref(f"p{n}"), 1) for n in range(1, 10)])
    with pytest.raises(DealError, match="55 cards, 1 deck holds 52: at most 9 seats"):
        committed.lock([LockedSeat(n, ref(f"p{n}"), 1) for n in range(1, 11)])
    two_decks = CommittedRound("r", HouseRules(decks=2), bytes(32))
    assert len(two_decks.lock([LockedSeat(n, ref(f"p{n}"), 1) for n in range(1, 11)]).seats) == 10


def test_deal_refuses_a_short_deck_and_doubled_seats() -> None:
    with pytest.raises(DealError, match="need 15 cards, the deck has 14"):
        deal_round_robin(standard_deck()[:14], [1, 2])
    with pytest.raises(DealError, match="unique"):
        deal_round_robin(standard_deck(), [1, 1])
