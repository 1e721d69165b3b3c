"""Monte Carlo simulation of heads-up rounds, vectorised: the cross-check of the PAR sheet.

Needs numpy (the ``evidence`` extra), as :mod:`gnau_service.rules.batch` does.

A round deals one player seat and the dealer five cards each from a freshly shuffled shoe and
settles the seat by the real rules: strictly stronger wins, equal hands go by the ``tie`` house
rule, Five Dukes against Five Dukes is always a tie, and a winning suited hand is paid double
under ``suited_double``. The deal is a uniformly random ordered draw of ten distinct physical
cards of the shoe (a partial Fisher-Yates shuffle), so which five go to which side is as in
the real round-robin deal: every split of the shuffled deck is equally likely.

The random numbers come from numpy's PCG64 with a fixed seed: this is a reproducible
statistical test of the game's arithmetic, not a deal, so the service's rule that randomness
comes only from the OS CSPRNG and the round's DRBG does not apply (and the real shuffle path
is checked separately, in ``tests/rules/test_simulation.py``).

>>> result = simulate(HouseRules(), rounds=20_000, seed=1)
>>> result.rounds, sum(result.counts.values())
(20000, 20000)
>>> -0.3 < result.mean < 0.1
True
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from gnau_service.rules.batch import (
    FIVE_DUKES_STRENGTH,
    BatchEvaluator,
    Cards,
    high_cards,
    payout_by_strength,
    suited,
)
from gnau_service.rules.cards import CARDS_PER_DECK
from gnau_service.rules.evaluation import HAND_SIZE
from gnau_service.rules.house_rules import HouseRules, TieRule
from gnau_service.rules.settlement import Outcome

#: Rounds dealt per numpy batch: big enough to hide Python's overhead, small enough for cache.
BATCH_ROUNDS: Final = 1 << 17

_OUTCOME_CODES: Final = {1: Outcome.WIN, 0: Outcome.TIE, -1: Outcome.LOSE}


@dataclass(frozen=True)
class HeadsUp:
    """Settled heads-up rounds: per round, the player's outcome (1 win, 0 tie, -1 lose) and the
    player's result per unit stake (the dealer's is its negation)."""

    outcomes: npt.NDArray[np.int8]
    deltas: npt.NDArray[np.int8]


def settle_heads_up(player: Cards, dealer: Cards, rules: HouseRules) -> HeadsUp:
    """Settle one player hand against one dealer hand per row, at unit stake.

    The same semantics as :func:`gnau_service.rules.settlement.settle` for one seat.
    """
    evaluator = BatchEvaluator(rules)
    player_strength = evaluator.strengths(player)
    dealer_strength = evaluator.strengths(dealer)
    payout = payout_by_strength(rules)
    player_units = payout.take(player_strength)
    dealer_units = payout.take(dealer_strength)
    if rules.suited_double:
        player_units = np.where(suited(player), player_units * 2, player_units)
        dealer_units = np.where(suited(dealer), dealer_units * 2, dealer_units)
    outcomes = np.sign(player_strength - dealer_strength).astype(np.int8)
    equal = outcomes == 0
    if rules.tie is TieRule.HIGH_CARD:
        # A strictly higher high card wins; an equal one (possible with several decks) loses.
        higher = high_cards(player) > high_cards(dealer)
        outcomes[equal] = np.where(higher[equal], 1, -1)
    elif rules.tie is TieRule.DEALER:
        outcomes[equal] = -1
    both_dukes = (player_strength == FIVE_DUKES_STRENGTH) & (dealer_strength == FIVE_DUKES_STRENGTH)
    outcomes[both_dukes] = 0
    deltas = np.where(outcomes > 0, player_units, 0) - np.where(outcomes < 0, dealer_units, 0)
    return HeadsUp(outcomes=outcomes, deltas=deltas.astype(np.int8))


@dataclass(frozen=True)
class Simulation:
    """What ``rounds`` simulated rounds gave: how many rounds ended with each (outcome, player
    result per unit stake)."""

    rules: HouseRules
    rounds: int
    counts: Mapping[tuple[Outcome, int], int]

    def frequency(self, outcome: Outcome) -> float:
        """The share of rounds with this outcome for the player."""
        return sum(n for (o, _), n in self.counts.items() if o is outcome) / self.rounds

    @property
    def mean(self) -> float:
        """The player's mean result per unit stake (the RTP less 1; the house edge negated)."""
        return sum(delta * n for (_, delta), n in self.counts.items()) / self.rounds

    @property
    def variance(self) -> float:
        """The sample variance of the player's result per unit stake."""
        mean = self.mean
        squares = sum((delta - mean) ** 2 * n for (_, delta), n in self.counts.items())
        return squares / (self.rounds - 1)

    @property
    def standard_deviation(self) -> float:
        return math.sqrt(self.variance)

    def amount_frequencies(self) -> dict[int, Fraction]:
        """The share of rounds that ended with each player result per unit stake."""
        amounts: Counter[int] = Counter()
        for (_, delta), n in self.counts.items():
            amounts[delta] += n
        return {delta: Fraction(n, self.rounds) for delta, n in sorted(amounts.items())}


def shoe_cards(decks: int) -> npt.NDArray[np.intp]:
    """The card index of each physical card of a shoe of ``decks`` decks."""
    return np.arange(decks * CARDS_PER_DECK, dtype=np.intp) % CARDS_PER_DECK


def deal_heads_up(
    rng: np.random.Generator, rounds: int, shoe: npt.NDArray[np.intp]
) -> tuple[Cards, Cards]:
    """``rounds`` deals of a player hand and a dealer hand from ``shoe`` (card indices, one per
    physical card): a partial Fisher-Yates over each round's own copy of the shoe.

    Returned in column-major order (each card position contiguous), which the evaluator's
    look-ups read fastest.
    """
    size, dealt = len(shoe), 2 * HAND_SIZE
    if size < dealt:
        raise ValueError(f"a heads-up round needs {dealt} cards, the shoe has {size}")
    dtype = np.uint8 if size <= 1 << 8 else np.uint16
    positions = np.empty((size, rounds), dtype=dtype)
    positions[:] = np.arange(size, dtype=dtype)[:, None]
    flat, columns = positions.reshape(-1), np.arange(rounds)
    for top in range(dealt):
        picked = (top + rng.integers(0, size - top, rounds)) * rounds + columns
        chosen = flat[picked]
        flat[picked] = positions[top]
        positions[top] = chosen
    cards = shoe.take(positions[:dealt]).T
    return cards[:, :HAND_SIZE], cards[:, HAND_SIZE:]


def simulate(
    rules: HouseRules,
    rounds: int,
    *,
    seed: int,
    shoe: Sequence[int] | None = None,
) -> Simulation:
    """Deal and settle ``rounds`` heads-up rounds under ``rules``, reproducibly from ``seed``.

    ``shoe`` lists the card index of each physical card; by default the ``rules.decks``
    standard decks. A smaller shoe lets a test compare with brute force over every deal.
    """
    cards = shoe_cards(rules.decks) if shoe is None else np.asarray(shoe, dtype=np.intp)
    rng = np.random.default_rng(seed)
    counts: Counter[tuple[Outcome, int]] = Counter()
    done = 0
    while done < rounds:
        size = min(BATCH_ROUNDS, rounds - done)
        player, dealer = deal_heads_up(rng, size, cards)
        settled = settle_heads_up(player, dealer, rules)
        # One code per (outcome, delta) pair: deltas lie in -20..20, outcomes in -1..1.
        codes = (settled.outcomes.astype(np.intp) + 1) * 64 + settled.deltas + 32
        for code in np.flatnonzero(tallies := np.bincount(codes)):
            outcome, delta = divmod(int(code), 64)
            counts[(_OUTCOME_CODES[outcome - 1], delta - 32)] += int(tallies[code])
        done += size
    return Simulation(rules=rules, rounds=rounds, counts=dict(counts))
