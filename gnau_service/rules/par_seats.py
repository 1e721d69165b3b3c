"""The covariance of two seats' results in one round, for the dealer's figures over N seats.

Seats share the dealer's hand, which makes their results move together, and the deck, which
makes them exclude each other's cards. The covariance here counts the first exactly at the
level of the dealer's class multiset and leaves out the second (docs/par.md, "Several seats"):

``Cov(X1, X2) ~ Var(E[X | dealer's class multiset])``

that is, the seats are taken as independent once the dealer's hand's class multiset is known.
"""

from __future__ import annotations

import math
from fractions import Fraction

from gnau_service.rules.evaluation import HAND_SIZE
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par_counts import ClassPool, dealer_class_multisets
from gnau_service.rules.par_outcomes import deal_outcomes


def seat_covariance(rules: HouseRules, pool: ClassPool | None = None) -> Fraction:
    """``Var(E[X | D])`` over the dealer's class multiset ``D``, ``X`` a seat's result, for the
    decks of ``rules`` or the cards of ``pool``."""
    pool = pool or ClassPool.decks(rules.decks)
    hands = math.comb(pool.size, HAND_SIZE)
    mean = Fraction(0)
    second = Fraction(0)
    for dealer in dealer_class_multisets(rules, pool):
        outcomes = deal_outcomes(rules, pool, dealer=dealer)
        weight = Fraction(
            math.prod(math.comb(pool.copies[c], k) for c, k in enumerate(dealer)), hands
        )
        conditional = sum((o.probability * o.units for o in outcomes), Fraction(0))
        mean += weight * conditional
        second += weight * conditional**2
    return second - mean**2
