"""Every one of the 2,598,960 five-card hands, in the style of the well-known poker evaluators.

The digest pins the strength of every hand, in ``itertools.combinations`` order over the
canonical deck, under the default rules. It was computed once by the table evaluator and is
independently confirmed by the slow test, which recomputes every hand with the plain oracle.
"""

import hashlib
import itertools
import multiprocessing

import pytest

from gnau_service.rules.cards import Card, standard_deck
from gnau_service.rules.evaluation import ALL_HAND_RANKS, Evaluator
from gnau_service.rules.house_rules import HouseRules
from tests.rules import oracle

ALL_HANDS_DIGEST = "fc878679fc921f55c03a216581d36ed0b593f2cbd67ab6885877f54d08a2e113"


def test_digest_of_every_hand() -> None:
    rank = Evaluator(HouseRules()).rank
    strengths = bytes(rank(hand).strength for hand in itertools.combinations(standard_deck(), 5))
    assert len(strengths) == 2_598_960
    assert hashlib.sha256(strengths).hexdigest() == ALL_HANDS_DIGEST


_STRENGTH_OF = {(str(rank.category), rank.value): rank.strength for rank in ALL_HAND_RANKS}


def _oracle_strengths(first_card: int) -> bytes:
    deck = standard_deck()
    rest = deck[first_card + 1 :]
    return bytes(
        _STRENGTH_OF[oracle.best_result((deck[first_card], *others))]
        for others in itertools.combinations(rest, 4)
    )


@pytest.mark.slow
def test_digest_of_every_hand_by_the_oracle() -> None:
    # combinations() order is "first card, then the rest": split on the first card.
    with multiprocessing.Pool() as pool:
        parts = pool.map(_oracle_strengths, range(52 - 4))
    assert hashlib.sha256(b"".join(parts)).hexdigest() == ALL_HANDS_DIGEST


def test_oracle_split_matches_combinations_order() -> None:
    deck: tuple[Card, ...] = standard_deck()[:8]
    split = [
        (deck[i], *rest) for i in range(4) for rest in itertools.combinations(deck[i + 1 :], 4)
    ]
    assert split == list(itertools.combinations(deck, 5))
