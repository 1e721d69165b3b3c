"""Cards, ranks and suits, their text notation, and the canonical deck order.

A card is written rank then suit, case-insensitive: ``A 2 3 4 5 6 7 8 9 T J Q K`` (``10`` is
accepted for ``T``) and ``C D H S``.

>>> parse_card("10h")
Card(rank=<Rank.TEN: 'T'>, suit=<Suit.HEARTS: 'H'>)
>>> str(parse_card("qc")), parse_card("qc").symbol
('QC', 'Q♣')
>>> [str(card) for card in parse_cards("AS kd 3c")]
['AS', 'KD', '3C']
>>> len(standard_deck(2)), str(standard_deck()[0]), str(standard_deck()[-1])
(104, 'AC', 'KS')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gnau_service.common.quoting import quoted
from gnau_service.rules.errors import CardError


class Suit(StrEnum):
    """The four suits, in canonical deck order."""

    CLUBS = "C"
    DIAMONDS = "D"
    HEARTS = "H"
    SPADES = "S"

    @property
    def symbol(self) -> str:
        """The suit as people print it: ♣ ♦ ♥ ♠."""
        return _SUIT_SYMBOLS[self]


class Rank(StrEnum):
    """The thirteen ranks, ace low, in canonical deck order."""

    ACE = "A"
    TWO = "2"
    THREE = "3"
    FOUR = "4"
    FIVE = "5"
    SIX = "6"
    SEVEN = "7"
    EIGHT = "8"
    NINE = "9"
    TEN = "T"
    JACK = "J"
    QUEEN = "Q"
    KING = "K"

    @property
    def face(self) -> int:
        """Face rank 1-13 (A=1, J=11, Q=12, K=13): the value of a Double-Ox."""
        return _RANK_ORDER.index(self) + 1

    @property
    def ox_points(self) -> tuple[int, ...]:
        """Every Ox-point value the rank may count at: 3 and 6 are each worth 3 or 6."""
        if self in (Rank.THREE, Rank.SIX):
            return (3, 6)
        return (min(self.face, 10),)

    @property
    def label(self) -> str:
        """The rank as people print it (``10`` rather than ``T``)."""
        return "10" if self is Rank.TEN else self.value


_RANK_ORDER: Final = tuple(Rank)
_SUIT_ORDER: Final = tuple(Suit)
_SUIT_SYMBOLS: Final = {
    Suit.CLUBS: "♣",
    Suit.DIAMONDS: "♦",
    Suit.HEARTS: "♥",
    Suit.SPADES: "♠",
}
CARDS_PER_DECK: Final = len(_RANK_ORDER) * len(_SUIT_ORDER)


@dataclass(frozen=True, slots=True)
class Card:
    """One playing card.

    ``index`` is the card's place in one canonical deck (clubs, diamonds, hearts, spades; ace
    to king within each suit), so ``index`` runs from 0 (AC) to 51 (KS).

    >>> Card(Rank.ACE, Suit.SPADES).index, Card(Rank.KING, Suit.CLUBS).index
    (39, 12)
    """

    rank: Rank
    suit: Suit
    face: int = field(init=False, repr=False, compare=False)
    index: int = field(init=False, repr=False, compare=False)
    bit: int = field(init=False, repr=False, compare=False)
    code: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Plain values, cached per card, keep the evaluator's inner loops free of enum hashing
        # and every answer that lists cards free of enum lookups.
        face = self.rank.face
        index = _SUIT_ORDER.index(self.suit) * len(_RANK_ORDER) + face - 1
        object.__setattr__(self, "face", face)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "bit", 1 << index)
        object.__setattr__(self, "code", f"{self.rank.value}{self.suit.value}")

    def __str__(self) -> str:
        return self.code

    @property
    def symbol(self) -> str:
        """The card as people print it, with a suit symbol: ``10♥``."""
        return f"{self.rank.label}{self.suit.symbol}"


_DECK: Final = tuple(Card(rank, suit) for suit in _SUIT_ORDER for rank in _RANK_ORDER)
_BY_TEXT: Final = {str(card): card for card in _DECK}


def parse_card(token: str) -> Card:
    """Parse one card, case-insensitively; ``10`` is accepted for ``T``.

    >>> parse_card("1x")
    Traceback (most recent call last):
    ...
    gnau_service.rules.errors.CardError: not a card: '1x' (rank A 2-9 T/10 J Q K, then suit C D H S)
    """
    text = token.strip().upper()
    if text.startswith("10"):
        text = "T" + text[2:]
    card = _BY_TEXT.get(text)
    if card is None:
        raise CardError(
            f"not a card: {quoted(token)} (rank A 2-9 T/10 J Q K, then suit C D H S)", token=token
        )
    return card


def parse_cards(text: str | Iterable[str]) -> tuple[Card, ...]:
    """Parse cards given as one whitespace- or comma-separated string, or as tokens."""
    tokens = text.replace(",", " ").split() if isinstance(text, str) else text
    return tuple(parse_card(token) for token in tokens)


def card_from_index(index: int) -> Card:
    """The card at ``index`` of the canonical order of any number of decks (wraps per deck)."""
    return _DECK[index % CARDS_PER_DECK]


def standard_deck(decks: int = 1) -> tuple[Card, ...]:
    """``decks`` standard decks in canonical order, concatenated."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, got {decks}")
    return _DECK * decks


def check_copies(cards: Iterable[Card], decks: int) -> None:
    """Refuse cards that ``decks`` decks cannot all hold: no card more than ``decks`` times.

    >>> check_copies(parse_cards("TC 9S TC"), decks=1)
    Traceback (most recent call last):
    ...
    gnau_service.rules.errors.CardError: card TC appears 2 times but 1 deck holds only 1
    """
    for card, copies in Counter(cards).items():
        if copies > decks:
            holds = "1 deck holds" if decks == 1 else f"{decks} decks hold"
            raise CardError(
                f"card {card} appears {copies} times but {holds} only {decks}", token=str(card)
            )


def format_cards(cards: Iterable[Card]) -> str:
    """Cards in text notation, space-separated: the inverse of :func:`parse_cards`."""
    return " ".join(str(card) for card in cards)
