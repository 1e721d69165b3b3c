"""Benchmark of the Monte Carlo cross-check: batch evaluation and simulated rounds per second.

Run with ``make bench-par-montecarlo`` (or ``.venv/bin/python bench/bench_par_montecarlo.py``);
needs numpy (the ``evidence`` extra, which ``test`` includes). Every figure is printed beside
its baseline, measured in the same run on the same hands:

- the numpy batch evaluator (:class:`BatchEvaluator`) against the scalar table evaluator
  (``Evaluator.rank``, one Python call per hand), in hands per second and CPU per hand;
- whole simulated heads-up rounds (deal, evaluate both hands, settle) per second;
- with ``--cross-check N``, the Monte Carlo cross-check itself: N simulated rounds under each
  published rule set against its exact PAR sheet, printing the simulated and exact mean result
  per unit stake, the standard error and the distance in standard errors (the tests of
  ``tests/rules/test_simulation.py`` require at most 5, for every figure).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the rule sets of the tests

from gnau_service.rules.batch import BatchEvaluator
from gnau_service.rules.cards import standard_deck
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par import par_sheet
from gnau_service.rules.simulation import deal_heads_up, shoe_cards, simulate
from tests.rules.test_simulation import EVERYTHING_CHANGED, PUBLISHED


def best_of(repeats: int, work: Callable[[], object]) -> tuple[float, float]:
    """The least wall-clock and CPU seconds of ``repeats`` runs: the least disturbed."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        work()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=1_000_000, help="for the scalar baseline")
    parser.add_argument("--batch-hands", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cross-check", type=int, default=0, metavar="ROUNDS")
    args = parser.parse_args()
    if args.cross_check:
        cross_check(args.cross_check)
        return

    rules = HouseRules()
    rng = np.random.default_rng(2026)
    # The same random one-deck hands for both: the batch set repeats the scalar one.
    player, _ = deal_heads_up(rng, args.hands, shoe_cards(1))
    deck = standard_deck()
    hands = [tuple(deck[i] for i in row) for row in player.tolist()]
    copies = -(-args.batch_hands // args.hands)
    batch = np.asfortranarray(np.tile(player, (copies, 1))[: args.batch_hands])
    evaluator, batch_evaluator = Evaluator(rules), BatchEvaluator(rules)
    assert batch_evaluator.strengths(batch[: len(hands)]).tolist() == [
        evaluator.rank(hand).strength for hand in hands
    ], "the batch evaluator disagrees with the scalar one"

    def scalar() -> None:
        rank = evaluator.rank
        for hand in hands:
            rank(hand)

    print(f"Hand evaluation, default rules, random one-deck hands (best of {args.repeats})")
    scalar_wall, scalar_cpu = best_of(args.repeats, scalar)
    batch_wall, batch_cpu = best_of(args.repeats, lambda: batch_evaluator.strengths(batch))
    scalar_rate, batch_rate = len(hands) / scalar_wall, len(batch) / batch_wall
    print(
        f"  scalar Evaluator.rank (baseline)  {scalar_rate:>13,.0f} hands/s  "
        f"{1e9 * scalar_cpu / len(hands):6.1f} ns CPU/hand  ({len(hands):,} hands)"
    )
    print(
        f"  numpy BatchEvaluator.strengths    {batch_rate:>13,.0f} hands/s  "
        f"{1e9 * batch_cpu / len(batch):6.1f} ns CPU/hand  ({len(batch):,} hands)"
    )
    ratio = batch_rate / scalar_rate
    print(f"  ratio batch / scalar              {ratio:>13.1f}x  (target: 1e7 hands/s)")

    print(f"\nSimulated heads-up rounds: deal, evaluate, settle (best of {args.repeats})")
    for name, simulated in (("1 deck", rules), ("2 decks", HouseRules(decks=2))):
        wall, cpu = best_of(args.repeats, lambda r=simulated: simulate(r, args.rounds, seed=1))
        print(
            f"  {name:<8} {args.rounds / wall:>13,.0f} rounds/s  "
            f"{1e9 * cpu / args.rounds:6.1f} ns CPU/round  ({args.rounds:,} rounds)"
        )


def cross_check(rounds: int) -> None:
    """Simulated against exact mean result per unit stake, for every published rule set."""
    print(f"Monte Carlo cross-check: {rounds:,} rounds per rule set, seeds 14000, 14001, ...")
    print(f"  {'rule set':<22} {'exact RTP':>10} {'simulated':>10} {'std err':>9} {'z':>6}")
    rule_sets = (*PUBLISHED, ("everything-changed", EVERYTHING_CHANGED))
    for seed, (name, assignments) in enumerate(rule_sets, start=14_000):
        rules = HouseRules.from_assignments(assignments)
        sheet = par_sheet(rules)
        simulated = simulate(rules, rounds, seed=seed)
        error = sheet.standard_deviation / math.sqrt(rounds)
        z = (simulated.mean - float(sheet.mean)) / error
        print(
            f"  {name:<22} {float(sheet.rtp):>10.6f} {1 + simulated.mean:>10.6f} "
            f"{error:>9.6f} {z:>+6.2f}"
        )


if __name__ == "__main__":
    main()
