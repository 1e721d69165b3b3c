"""Shuffle: Fisher-Yates over the canonical deck, driven by HMAC_DRBG output.

The DRBG is instantiated with ``entropy_input = server_seed``, ``nonce = transcript_hash`` and
``personalization_string = SHUFFLE_TAG``. Its output is read as a stream of 4-byte big-endian
words, the stream being successive ``Generate(64 bytes)`` calls (16 words each). A draw below
``n`` takes the next word ``w``: if ``w < 2**32 - (2**32 mod n)`` the draw is ``w mod n``,
otherwise ``w`` is discarded and the next word is tried. The accepted words form a whole
number of copies of ``0 .. n-1``, so each value is exactly equally likely: no modulo bias and
no floating point.

Fisher-Yates (Durstenfeld's form) then walks the deck from its last position down:
for ``i = len-1 .. 1``, draw ``j`` below ``i + 1`` and swap positions ``i`` and ``j``. Each of
the ``len!`` draw sequences gives a different order, so every order is equally likely.
Position 0 of the result is the first card dealt.

>>> words = iter([7, 2**32 - 1, 9])
>>> draw_below(5, words), draw_below(5, words)  # 2**32 - 1 is rejected for n = 5
(2, 4)
>>> [str(card) for card in shuffle_deck(bytes(32), bytes(32), decks=1)[:5]]
['6S', '3C', '6C', 'TC', 'KH']
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final, TypeVar

from gnau_service.fairness.commitment import require_hash, require_server_seed
from gnau_service.fairness.drbg import HmacDrbg
from gnau_service.fairness.encoding import SHUFFLE_TAG
from gnau_service.rules.cards import Card, standard_deck

WORD_BYTES: Final = 4
WORD_BITS: Final = 8 * WORD_BYTES
GENERATE_BYTES: Final = 64
"""Bytes asked of the DRBG per Generate call: 16 words, two HMAC blocks."""

_BLOCK_OF_WORDS: Final = struct.Struct(f">{GENERATE_BYTES // WORD_BYTES}I")

_T = TypeVar("_T")


def shuffle_drbg(server_seed: bytes, transcript_hash: bytes) -> HmacDrbg:
    """The round's DRBG, keyed by the secret seed and bound to the locked transcript.

    Keying with the secret seed (not with anything published before the reveal) is what keeps
    the deck unpredictable until the reveal.
    """
    require_server_seed(server_seed)
    require_hash(transcript_hash, "transcript_hash")
    return HmacDrbg(
        entropy_input=server_seed, nonce=transcript_hash, personalization_string=SHUFFLE_TAG
    )


def drbg_words(drbg: HmacDrbg) -> Iterator[int]:
    """The endless stream of 32-bit big-endian words from successive 64-byte Generate calls."""
    while True:
        yield from _BLOCK_OF_WORDS.unpack(drbg.generate(GENERATE_BYTES))


def accept_word(word: int, n: int, word_bits: int = WORD_BITS) -> int | None:
    """The draw below ``n`` that one ``word_bits``-bit word gives, or ``None`` if it is rejected.

    Exactly ``2**word_bits mod n`` words (the top ones) are rejected: the fewest that leave a
    whole number of copies of each value.

    >>> [accept_word(word, 3, word_bits=2) for word in range(4)]
    [0, 1, 2, None]
    """
    span = 1 << word_bits
    if word >= span - span % n:
        return None
    return word % n


def draw_below(n: int, words: Iterator[int], word_bits: int = WORD_BITS) -> int:
    """A uniform integer in ``0 .. n-1``, consuming words until one is accepted."""
    if not 1 <= n <= 1 << word_bits:
        raise ValueError(f"n must be from 1 to 2**{word_bits}, got {n}")
    for word in words:
        drawn = accept_word(word, n, word_bits)
        if drawn is not None:
            return drawn
    raise ValueError("the word stream ended before a word was accepted")


def fisher_yates(items: Sequence[_T], words: Iterator[int], word_bits: int = WORD_BITS) -> list[_T]:
    """A new list holding ``items`` in the order the words choose (Durstenfeld's form)."""
    order = list(items)
    for top in range(len(order) - 1, 0, -1):
        pick = draw_below(top + 1, words, word_bits)
        order[top], order[pick] = order[pick], order[top]
    return order


def shuffle_deck(server_seed: bytes, transcript_hash: bytes, decks: int) -> tuple[Card, ...]:
    """The round's deck: ``decks`` canonical decks shuffled by the round's DRBG."""
    words = drbg_words(shuffle_drbg(server_seed, transcript_hash))
    return tuple(fisher_yates(standard_deck(decks), words))
