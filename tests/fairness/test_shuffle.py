"""The rejection sampler and Fisher-Yates: exactly uniform, by exhaustion where it fits."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.fairness.shuffle import (
    WORD_BITS,
    accept_word,
    draw_below,
    fisher_yates,
    shuffle_deck,
)
from gnau_service.rules.cards import standard_deck
from gnau_service.rules.house_rules import MAX_DECKS


def _outcomes(n: int, word_bits: int) -> Counter[int | None]:
    return Counter(accept_word(word, n, word_bits) for word in range(1 << word_bits))


@pytest.mark.parametrize("n", range(1, 257))
def test_every_8_bit_word_maps_uniformly(n: int) -> None:
    """All 256 words: each value below n is hit equally often, and exactly 256 mod n words
    (the fewest possible, and the top ones) are rejected."""
    outcomes = _outcomes(n, word_bits=8)
    rejected = outcomes.pop(None, 0)
    assert rejected == 256 % n
    assert set(outcomes) == set(range(n))
    assert set(outcomes.values()) == {256 // n}
    assert all(accept_word(word, n, 8) is None for word in range(256 - rejected, 256))


@pytest.mark.parametrize("n", [2, 3, 7, 51, 52, 100, 103, 104, 415, 416, 65535, 65536])
def test_every_16_bit_word_maps_uniformly(n: int) -> None:
    """The deck sizes in use (up to 8 decks: 416) and the edges of a 16-bit word."""
    outcomes = _outcomes(n, word_bits=16)
    assert outcomes.pop(None, 0) == 65536 % n
    assert set(outcomes.values()) == {65536 // n}
    assert len(outcomes) == n


@given(st.integers(0, 2**WORD_BITS - 1), st.integers(1, 416))
def test_32_bit_words_keep_their_residue_or_are_rejected(word: int, n: int) -> None:
    drawn = accept_word(word, n)
    limit = 2**WORD_BITS - 2**WORD_BITS % n
    assert limit % n == 0
    assert drawn == (word % n if word < limit else None)


def test_draw_below_skips_rejected_words() -> None:
    words = iter([2**32 - 1, 2**32 - 4, 10])  # 2**32 mod 7 = 4: the top four words are rejected
    assert draw_below(7, words) == 10 % 7
    assert next(words, None) is None


def test_draw_below_refuses_an_empty_range_and_an_exhausted_stream() -> None:
    with pytest.raises(ValueError, match="n must be"):
        draw_below(0, iter([1]))
    with pytest.raises(ValueError, match="ended"):
        draw_below(3, iter([255]), word_bits=8)


@pytest.mark.parametrize("size", range(1, 7))
def test_fisher_yates_is_a_bijection_from_draws_to_orders(size: int) -> None:
    """Every sequence of in-range draws gives a different order, so all size! orders are hit
    exactly once: with uniform draws, every order is equally likely."""
    draw_ranges = [range(top + 1) for top in range(size - 1, 0, -1)]
    orders = Counter(
        tuple(fisher_yates(range(size), iter(draws))) for draws in itertools.product(*draw_ranges)
    )
    assert len(orders) == math.factorial(size)
    assert set(orders.values()) == {1}


def test_fisher_yates_draws_from_the_top_position_down() -> None:
    # Draws below 4, 3, 2: the first swaps position 3 with position 0, and so on.
    assert fisher_yates("abcd", iter([0, 0, 0])) == list("bcda")
    assert fisher_yates("abcd", iter([3, 2, 1])) == list("abcd")


@pytest.mark.parametrize("decks", range(1, MAX_DECKS + 1))
def test_shuffle_deck_permutes_the_canonical_decks(decks: int) -> None:
    deck = shuffle_deck(bytes([decks]) * 32, bytes(32), decks)
    assert Counter(deck) == Counter(standard_deck(decks))
    assert deck != standard_deck(decks)


def test_shuffle_deck_is_deterministic_and_keyed_by_both_inputs() -> None:
    seed, transcript = bytes(range(32)), bytes(range(32, 64))
    assert shuffle_deck(seed, transcript, 1) == shuffle_deck(seed, transcript, 1)
    assert shuffle_deck(seed, transcript, 1) != shuffle_deck(transcript, seed, 1)
