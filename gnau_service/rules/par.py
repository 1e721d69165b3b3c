"""The PAR sheet: the exact probability and price of every settlement outcome under a rule set.

One player seat plays the dealer, one unit of stake. Every heads-up deal of the decks in play
(every player hand, and every dealer hand from the cards left) is counted once, exactly, by the
class-multiset method of :mod:`gnau_service.rules.par_counts` (proof in docs/par.md) and sorted
into outcomes by :mod:`gnau_service.rules.par_outcomes`, which prices each with settlement's own
rule, :func:`~gnau_service.rules.settlement.category_units`, so the sheet prices what the service
settles. The dealer's figures over several seats add the seat covariance of
:mod:`gnau_service.rules.par_seats`.

The figures are per unit stake. The player's result ``X`` of a deal is ``+units`` for a win,
``-units`` for a loss (the dealer's hand prices it) and ``0`` for a tie. Since a player can lose
more than the stake, the return to player is defined on the stake: ``rtp = 1 + E[X]``,
``house_edge = -E[X]``.

>>> sheet = par_sheet(HouseRules(decks=1))
>>> sheet.rtp + sheet.house_edge
Fraction(1, 1)
>>> sum(outcome.probability for outcome in sheet.outcomes)
Fraction(1, 1)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from gnau_service.rules.cards import CARDS_PER_DECK
from gnau_service.rules.evaluation import HAND_SIZE
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par_counts import ClassPool
from gnau_service.rules.par_outcomes import ParOutcome, deal_outcomes
from gnau_service.rules.par_seats import seat_covariance
from gnau_service.rules.settlement import Outcome


@dataclass(frozen=True)
class ParSheet:
    """Every outcome of one seat against the dealer under ``rules``, with its exact
    probability and price, and the figures a regulator asks for, per unit stake."""

    rules: HouseRules
    #: Seats at the table for the dealer's figures (each seat's own figures do not depend on it).
    seats: int
    #: Heads-up deals counted: ``C(52d, 5) x C(52d - 5, 5)``.
    deals: int
    #: Best for the player first: wins, ties, then losses, each by the deciding hand.
    outcomes: tuple[ParOutcome, ...]
    #: The player's expected result per unit stake, ``E[X]``.
    mean: Fraction
    rtp: Fraction
    house_edge: Fraction
    variance: Fraction
    standard_deviation: float
    #: Probability the player gains (a win that pays; a No Ox win pays nothing).
    hit_frequency: Fraction
    #: Probability of a tie (push or Five Dukes against Five Dukes): nothing moves.
    push_frequency: Fraction
    #: Probability nothing moves at all: ties, and wins or losses priced at 0 (a No Ox hand).
    zero_frequency: Fraction
    #: Covariance of two seats' results in one round (they share the dealer's hand and deck).
    seat_covariance: Fraction
    #: The dealer's expected result per round with ``seats`` seats of unit stake.
    dealer_expected: Fraction
    #: The variance and standard deviation of the dealer's result per round.
    dealer_variance: Fraction
    dealer_standard_deviation: float


def par_sheet(rules: HouseRules, *, seats: int = 1) -> ParSheet:
    """The exact PAR sheet of ``rules`` (cached per rule set and seat count)."""
    most = max_seats(rules.decks)
    if not isinstance(seats, int) or isinstance(seats, bool) or not 1 <= seats <= most:
        raise ValueError(f"seats must be an integer from 1 to {most}, got {seats!r}")
    return _par_sheet(rules, seats)


def max_seats(decks: int) -> int:
    """The most seats whose hands, with the dealer's, fit ``decks`` decks."""
    return decks * CARDS_PER_DECK // HAND_SIZE - 1


@functools.lru_cache(maxsize=256)
def _par_sheet(rules: HouseRules, seats: int) -> ParSheet:
    outcomes = deal_outcomes(rules, ClassPool.decks(rules.decks))
    covariance = seat_covariance(rules) if seats > 1 else Fraction(0)
    return sheet_of(rules, outcomes, seats=seats, covariance=covariance)


def sheet_of(
    rules: HouseRules,
    outcomes: tuple[ParOutcome, ...],
    *,
    seats: int = 1,
    covariance: Fraction = Fraction(0),
) -> ParSheet:
    """The sheet's figures from its outcomes."""
    mean = sum((o.probability * o.units for o in outcomes), Fraction(0))
    second = sum((o.probability * o.units**2 for o in outcomes), Fraction(0))
    variance = second - mean**2
    dealer_variance = seats * variance + seats * (seats - 1) * covariance
    return ParSheet(
        rules=rules,
        seats=seats,
        deals=sum(o.deals for o in outcomes),
        outcomes=outcomes,
        mean=mean,
        rtp=1 + mean,
        house_edge=-mean,
        variance=variance,
        standard_deviation=math.sqrt(variance),
        hit_frequency=sum((o.probability for o in outcomes if o.units > 0), Fraction(0)),
        push_frequency=sum(
            (o.probability for o in outcomes if o.outcome is Outcome.TIE), Fraction(0)
        ),
        zero_frequency=sum((o.probability for o in outcomes if o.units == 0), Fraction(0)),
        seat_covariance=covariance,
        dealer_expected=-seats * mean,
        dealer_variance=dealer_variance,
        dealer_standard_deviation=math.sqrt(dealer_variance),
    )
