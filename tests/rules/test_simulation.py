"""The Monte Carlo cross-check: simulated heads-up rounds against exact figures.

The confidence interval, for every figure and every rule set: the simulated value lies within
``Z`` = 5 standard errors of the exact value, the standard error computed from the exact
distribution of the player's result (not from the sample):

- mean result per unit stake (RTP less 1): sigma / sqrt(n);
- a frequency p (win, tie, each amount): sqrt(p (1 - p) / n);
- variance: sqrt((mu4 - sigma^4) / n), mu4 the fourth central moment.

At 5 standard errors a correct simulator fails one figure in about 1.7 million; the runs are
seeded, so a run that passes passes every time. The exact figures are:

- on a 12-card shoe, brute force through the real ``settle`` over every ordered pair of
  disjoint hands (also equal, to the last count, to the vectorised settlement of every pair);
- on full shoes, the PAR sheet (``gnau_service.rules.par``), for every published rule set
  (docs/par/) and one with every rule changed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from gnau_service.cli.par_commands import PUBLISHED
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.cards import parse_cards
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par import par_sheet
from gnau_service.rules.settlement import Outcome, PlayerHand, settle
from gnau_service.rules.simulation import Simulation, settle_heads_up, simulate
from tests.references import ref

Z = 5

#: Every rule set of the published sheets (the default rules and each single-rule change
#: from them), and one with every rule changed at once.
EVERYTHING_CHANGED = (
    "ten_is_duke=true",
    "three_six_pair=true",
    "trips_make_ox=false",
    "five_small=false",
    "tie=high_card",
    "payout=multiplier",
    "suited_double=true",
    "decks=2",
)
RULE_SETS = {
    name: HouseRules.from_assignments(assignments)
    for name, assignments in (*PUBLISHED, ("everything-changed", EVERYTHING_CHANGED))
}

# A shoe small enough for brute force that still holds every kind of hand the rules settle:
# Ngau Tonku (AS with a Duke), Five Small, Five Dukes with ten_is_duke, suited hands (six
# spades), 3/6 pairs, trips, and with two decks identical cards (the doubled AS and KS).
SMALL_SHOE = parse_cards("AS KS QS JS 3S 6S AD 2C 3C 4H KD TH")
SMALL_SHOE_TWO_DECKS = parse_cards("AS AS KS KS QS JS 3S 6S 2C 3C 4H TH")

Distribution = Mapping[tuple[Outcome, int], Fraction]
"""Probability of each (player's outcome, player's result per unit stake)."""


@dataclass(frozen=True)
class Exact:
    """Exact figures of a distribution, and the standard errors of their estimates."""

    distribution: Distribution

    def probability(self, outcome: Outcome) -> Fraction:
        return sum((p for (o, _), p in self.distribution.items() if o is outcome), Fraction(0))

    def amounts(self) -> dict[int, Fraction]:
        amounts: Counter[int] = Counter()
        for (_, delta), p in self.distribution.items():
            amounts[delta] += p  # type: ignore[assignment]
        return dict(amounts)

    @property
    def mean(self) -> Fraction:
        return sum((delta * p for (_, delta), p in self.distribution.items()), Fraction(0))

    def central_moment(self, order: int) -> Fraction:
        mean = self.mean
        return sum(
            ((delta - mean) ** order * p for (_, delta), p in self.distribution.items()),
            Fraction(0),
        )

    def check(self, simulated: Simulation) -> list[str]:
        """Every figure of ``simulated`` more than Z standard errors from the exact one."""
        n = simulated.rounds
        variance = self.central_moment(2)
        figures = [
            ("mean", simulated.mean, self.mean, math.sqrt(variance / n)),
            (
                "variance",
                simulated.variance,
                variance,
                math.sqrt((self.central_moment(4) - variance**2) / n),
            ),
        ]
        for outcome in Outcome:
            p = self.probability(outcome)
            figures.append((f"P({outcome})", simulated.frequency(outcome), p, _se(p, n)))
        observed = simulated.amount_frequencies()
        for amount, p in sorted(self.amounts().items()):
            figures.append((f"P(result {amount})", observed.get(amount, 0), p, _se(p, n)))
        assert set(observed) <= set(self.amounts()), "a result the exact figures never give"
        return [
            f"{name}: simulated {float(got):.6f}, exact {float(want):.6f}, standard error {se:.2e}"
            for name, got, want, se in figures
            if abs(float(got) - float(want)) > Z * se or (se == 0 and got != want)
        ]


def _se(p: Fraction, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def brute_force(shoe: tuple, rules: HouseRules) -> Distribution:  # type: ignore[type-arg]
    """Every ordered pair of disjoint hands of the shoe (by physical card), through settle."""
    counts: Counter[tuple[Outcome, int]] = Counter()
    positions = range(len(shoe))
    for player in itertools.combinations(positions, 5):
        rest = [p for p in positions if p not in player]
        for dealer in itertools.combinations(rest, 5):
            table = settle(
                [shoe[p] for p in dealer],
                [PlayerHand(1, tuple(shoe[p] for p in player), 1)],
                rules,
            )
            (seat,) = table.seats
            counts[(seat.outcome, seat.delta)] += 1
    total = sum(counts.values())
    return {key: Fraction(n, total) for key, n in counts.items()}


def vectorised_exact(shoe: tuple, rules: HouseRules) -> Distribution:  # type: ignore[type-arg]
    """The same enumeration, settled by the vectorised settlement the simulation uses."""
    pairs = [
        (player, dealer)
        for player in itertools.combinations(range(len(shoe)), 5)
        for dealer in itertools.combinations([p for p in range(len(shoe)) if p not in player], 5)
    ]
    index = np.array([card.index for card in shoe], dtype=np.intp)
    players = index.take(np.array([player for player, _ in pairs]))
    dealers = index.take(np.array([dealer for _, dealer in pairs]))
    settled = settle_heads_up(players, dealers, rules)
    codes = {1: Outcome.WIN, 0: Outcome.TIE, -1: Outcome.LOSE}
    outcomes, deltas = settled.outcomes.tolist(), settled.deltas.tolist()
    counts = Counter((codes[o], d) for o, d in zip(outcomes, deltas, strict=True))
    return {key: Fraction(n, len(pairs)) for key, n in counts.items()}


def small_shoe(rules: HouseRules) -> tuple:  # type: ignore[type-arg]
    return SMALL_SHOE if rules.decks == 1 else SMALL_SHOE_TWO_DECKS


#: The rule sets the small shoe is checked under in the default run: those whose settlement
#: differs (ties, suits, identical cards); every one of one or two decks in the slow run.
SETTLEMENT_RULE_SETS = [
    "default", "tie-push", "tie-high_card", "suited_double-true", "decks-2", "everything-changed",
]  # fmt: skip


@pytest.mark.parametrize("name", SETTLEMENT_RULE_SETS)
def test_simulation_on_a_small_shoe_agrees_with_brute_force(name: str) -> None:
    check_small_shoe(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, rules in RULE_SETS.items() if rules.decks <= 2])
def test_every_rule_set_on_a_small_shoe_agrees_with_brute_force(name: str) -> None:
    check_small_shoe(name)


def check_small_shoe(name: str) -> None:
    rules = RULE_SETS[name]
    shoe = small_shoe(rules)
    exact = brute_force(shoe, rules)
    assert vectorised_exact(shoe, rules) == exact  # to the last count
    simulated = simulate(rules, 200_000, seed=14, shoe=[card.index for card in shoe])
    assert Exact(exact).check(simulated) == []


def test_the_check_can_fail() -> None:
    """A simulation of other rules is caught: the interval is tight enough to matter."""
    rules = HouseRules()
    exact = Exact(brute_force(SMALL_SHOE, rules))
    other = simulate(
        HouseRules.from_mapping({"tie": "push"}),
        200_000,
        seed=14,
        shoe=[card.index for card in SMALL_SHOE],
    )
    assert exact.check(other) != []


# -- full shoes, against the PAR sheet ----------------------------------------------------------


def par_distribution(rules: HouseRules) -> Distribution:
    """The PAR sheet's outcomes as (outcome, result per unit stake) probabilities."""
    distribution: Counter[tuple[Outcome, int]] = Counter()
    for row in par_sheet(rules).outcomes:
        distribution[(row.outcome, row.units)] += row.probability  # type: ignore[assignment]
    return dict(distribution)


def check_against_par(name: str, rounds: int, seed: int) -> None:
    rules = RULE_SETS[name]
    exact, sheet = Exact(par_distribution(rules)), par_sheet(rules)
    # The sheet's own figures are the ones the distribution gives.
    assert (exact.mean, exact.central_moment(2)) == (sheet.mean, sheet.variance)
    assert exact.probability(Outcome.TIE) == sheet.push_frequency
    # A seed of its own per rule set: the same deals under every rule set would make their
    # checks one piece of evidence, not thirteen.
    simulated = simulate(rules, rounds, seed=seed + list(RULE_SETS).index(name))
    assert exact.check(simulated) == []
    hits = sum(n for (_, delta), n in simulated.counts.items() if delta > 0) / rounds
    assert abs(hits - sheet.hit_frequency) <= Z * _se(sheet.hit_frequency, rounds)


@pytest.mark.parametrize("name", ["default", "tie-high_card", "suited_double-true", "decks-2"])
def test_simulation_agrees_with_the_par_sheet(name: str) -> None:
    """500,000 rounds per rule set: the mean to within about 0.011 per unit stake. The rule
    sets whose settlement differs most (ties, suits, identical cards); every published one, and
    all rules changed at once, in the slow run below (their exact sheets take minutes)."""
    check_against_par(name, 500_000, seed=2026)


@pytest.mark.slow
@pytest.mark.parametrize("name", RULE_SETS)
def test_ten_million_simulated_rounds_agree_with_the_par_sheet(name: str) -> None:
    """10^7 rounds per rule set: the mean to within about 0.0025 per unit stake."""
    check_against_par(name, 10_000_000, seed=14_000)


# -- the real shuffle path ----------------------------------------------------------------------


def test_rounds_through_the_real_shuffle_agree_with_the_par_sheet() -> None:
    """Rounds committed, locked, shuffled by the HMAC_DRBG Fisher-Yates and dealt round-robin
    exactly as the service does, from fixed seeds: each settled by ``settle`` and by the
    vectorised settlement alike, and their mean within Z standard errors of the sheet's."""
    rules, rounds = HouseRules(), 3_000
    players, dealers, deltas = [], [], []
    for i in range(rounds):
        seed = hashlib.sha256(f"montecarlo/{i}".encode()).digest()
        committed = CommittedRound(f"mc-{i}", rules, server_seed=seed)
        deal = committed.lock([LockedSeat(1, ref("player"), 1)]).deal().deal
        (seat,) = settle(deal.dealer_hand, [PlayerHand(1, deal.hand_of(1), 1)], rules).seats
        players.append([card.index for card in deal.hand_of(1)])
        dealers.append([card.index for card in deal.dealer_hand])
        deltas.append(seat.delta)
    settled = settle_heads_up(np.array(players), np.array(dealers), rules)
    assert settled.deltas.tolist() == deltas
    sheet = par_sheet(rules)
    mean = sum(deltas) / rounds
    assert abs(mean - sheet.mean) <= Z * sheet.standard_deviation / math.sqrt(rounds)
