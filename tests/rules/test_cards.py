import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.rules.cards import (
    CARDS_PER_DECK,
    Card,
    Rank,
    Suit,
    card_from_index,
    check_copies,
    format_cards,
    parse_card,
    parse_cards,
    standard_deck,
)
from gnau_service.rules.errors import CardError


@pytest.mark.parametrize(
    ("token", "rank", "suit"),
    [
        ("AS", Rank.ACE, Suit.SPADES),
        ("TH", Rank.TEN, Suit.HEARTS),
        ("10h", Rank.TEN, Suit.HEARTS),
        ("qc", Rank.QUEEN, Suit.CLUBS),
        ("2d", Rank.TWO, Suit.DIAMONDS),
        (" kS ", Rank.KING, Suit.SPADES),
    ],
)
def test_parse_card_accepts_the_notation_in_any_case(token: str, rank: Rank, suit: Suit) -> None:
    assert parse_card(token) == Card(rank, suit)


@pytest.mark.parametrize("token", ["", "A", "S", "1S", "11C", "AX", "ASS", "10", "♠A", "ZZ", "0H"])
def test_parse_card_error_names_the_bad_token(token: str) -> None:
    with pytest.raises(CardError) as caught:
        parse_card(token)
    assert repr(token) in str(caught.value)
    assert caught.value.token == token


def test_parse_cards_names_the_first_bad_token_among_good_ones() -> None:
    with pytest.raises(CardError, match="'XQ'"):
        parse_cards("AS KD XQ 3C")


def test_parse_cards_accepts_commas_and_token_lists() -> None:
    assert parse_cards("AS,KD, 3c") == parse_cards(["as", "kd", "3C"])


def test_standard_deck_holds_each_card_once_per_deck_in_canonical_order() -> None:
    deck = standard_deck()
    assert len(deck) == len(set(deck)) == CARDS_PER_DECK == 52
    assert [str(card) for card in deck[:14]] == (
        "AC 2C 3C 4C 5C 6C 7C 8C 9C TC JC QC KC AD".split()
    )
    assert [card.index for card in deck] == list(range(52))
    assert standard_deck(3) == deck * 3


def test_standard_deck_refuses_no_decks() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        standard_deck(0)


@given(st.integers(min_value=0, max_value=52 * 8 - 1))
def test_card_from_index_matches_the_deck(index: int) -> None:
    assert card_from_index(index) == standard_deck(8)[index]


@given(st.lists(st.sampled_from(standard_deck()), min_size=1, max_size=10))
def test_format_and_parse_round_trip(cards: list[Card]) -> None:
    assert parse_cards(format_cards(cards)) == tuple(cards)


def test_card_symbol_uses_suit_symbols_and_prints_ten_as_10() -> None:
    assert [card.symbol for card in parse_cards("TH AS QC 2D")] == ["10♥", "A♠", "Q♣", "2♦"]


def test_ox_points_count_three_and_six_either_way() -> None:
    assert Rank.THREE.ox_points == Rank.SIX.ox_points == (3, 6)
    assert [Rank(r).ox_points for r in "A2457891"[:7]] == [(1,), (2,), (4,), (5,), (7,), (8,), (9,)]
    assert {Rank.TEN.ox_points, Rank.JACK.ox_points, Rank.QUEEN.ox_points} == {(10,)}
    assert Rank.KING.ox_points == (10,)


def test_check_copies_allows_as_many_copies_as_decks() -> None:
    check_copies(parse_cards("TC TC 9S"), decks=2)
    with pytest.raises(CardError, match="TC appears 3 times but 2 decks hold only 2"):
        check_copies(parse_cards("TC TC TC"), decks=2)
