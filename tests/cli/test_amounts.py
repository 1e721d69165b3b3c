"""Amounts as the command line prints them: a zero never carries a sign ("LOSE +0")."""

from __future__ import annotations

from gnau.v1 import round_pb2, types_pb2
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.cli.amounts import signed_amount
from gnau_service.cli.play_commands import _render
from gnau_service.cli.recall import _signed
from gnau_service.rules.cards import parse_cards
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import Outcome, PlayerHand, settle


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_an_amount_reads_back_and_only_a_nonzero_one_is_signed(value: int) -> None:
    text = signed_amount(value)
    assert int(text.replace(",", "")) == value
    assert text[0] == ("+" if value > 0 else "-" if value < 0 else "0")


def test_a_zero_is_printed_without_a_sign() -> None:
    assert (signed_amount(0), _signed(0), _signed(None)) == ("0", "0", "?")


def test_play_prints_a_loss_to_a_no_ox_dealer_as_lose_0() -> None:
    """A regression: a player who cannot beat a No Ox dealer pays stake x 0 and was shown as
    "LOSE +0". The rules call it a loss (docs/rules.md: the player "cannot beat" the dealer), so
    the word stays LOSE; the amount is 0, unsigned."""
    dealer = parse_cards("4D 4C 3S 8D 5D")  # No Ox
    player = parse_cards("4H 4S 3C 8C 5C")  # No Ox too: equal hands go to the dealer
    settled = settle(dealer, [PlayerHand(1, player, stake=10)], HouseRules())
    seat = settled.seats[0]
    assert (seat.outcome, seat.delta, settled.dealer_delta) == (Outcome.LOSE, 0, 0)
    played = round_pb2.Round(
        round_id="r-1",
        table_id="table-1",
        hands=[round_pb2.SeatHand(seat_number=1, cards=[str(card) for card in player])],
        dealer_hand=[str(card) for card in dealer],
        settlement=round_pb2.Settlement(
            seat_results=[
                round_pb2.SeatResult(
                    seat_number=1,
                    evaluation=types_pb2.HandEvaluation(description="No Ox"),
                    stake=10,
                    outcome=round_pb2.OUTCOME_LOSE,
                    delta=0,
                )
            ],
            dealer_evaluation=types_pb2.HandEvaluation(description="No Ox"),
            dealer_delta=0,
        ),
    )
    seat_line, dealer_line = _render(played, 1, None).splitlines()[1:3]
    assert seat_line.split()[-2:] == ["LOSE", "0"], seat_line
    assert dealer_line.split()[-1] == "0", dealer_line
    assert "+0" not in seat_line + dealer_line
