"""Benchmark of the exact PAR sheet: CPU seconds per rule set, against brute force.

Run with ``make bench-par`` (or ``.venv/bin/python bench/bench_par.py``). Each rule set's sheet
is computed in a fresh process (no table of an earlier rule set is reused), and the CPU time of
``par_sheet`` alone is reported. The baseline, measured in the same run: brute force, timed on
a sample of real deals (settlement's ``compare`` and ``payout_units`` on evaluations made once
per hand, the fastest honest brute force) and multiplied out to all 3,986,646,103,440 deals of
one deck.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import subprocess
import sys
import time

from gnau_service.rules.cards import standard_deck
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import Outcome, compare, payout_units

RULE_SETS: tuple[tuple[str, ...], ...] = (
    (),
    ("ten_is_duke=true",),
    ("three_six_pair=true",),
    ("trips_make_ox=false",),
    ("five_small=false",),
    ("tie=push",),
    ("tie=high_card",),
    ("payout=multiplier",),
    ("suited_double=true",),
    ("decks=2",),
    ("decks=8",),
    ("tie=high_card", "suited_double=true"),
    ("tie=high_card", "suited_double=true", "decks=8"),
)

CHILD = """
import json, sys, time
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par import par_sheet
rules = HouseRules.from_assignments(sys.argv[1:])
started = time.process_time()
sheet = par_sheet(rules)
print(json.dumps({"cpu": time.process_time() - started, "edge": float(sheet.house_edge)}))
"""


def one_rule_set(assignments: tuple[str, ...]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *assignments], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def brute_force_seconds_per_deal(deals: int) -> float:
    """CPU per deal of brute force, on ``deals`` random deals of one deck."""
    rules = HouseRules()
    evaluator = Evaluator(rules)
    deck = list(standard_deck())
    pairs = []
    for _ in range(deals):
        for i in range(10):
            j = i + secrets.randbelow(len(deck) - i)
            deck[i], deck[j] = deck[j], deck[i]
        pairs.append((evaluator.evaluate(deck[:5]), evaluator.evaluate(deck[5:10])))
    started = time.process_time()
    total = 0
    for player, dealer in pairs:
        outcome = compare(player, dealer, rules)
        if outcome is Outcome.WIN:
            total += payout_units(player, rules)
        elif outcome is Outcome.LOSE:
            total -= payout_units(dealer, rules)
    return (time.process_time() - started) / deals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=200_000, help="brute-force deals timed")
    args = parser.parse_args()
    all_deals = math.comb(52, 5) * math.comb(47, 5)
    per_deal = brute_force_seconds_per_deal(args.sample)
    brute = per_deal * all_deals
    print(
        f"brute force (baseline): {per_deal * 1e6:.2f} µs CPU per deal x {all_deals:,} deals "
        f"= {brute:,.0f} s ({brute / 86400 / 365.25:.1f} years) for one rule set"
    )
    print(f"{'rule set':<48} {'CPU s':>7} {'house edge':>11} {'vs brute force':>16}")
    seconds = []
    for assignments in RULE_SETS:
        result = one_rule_set(assignments)
        seconds.append(result["cpu"])
        name = " ".join(assignments) or "default"
        print(
            f"{name:<48} {result['cpu']:7.2f} {100 * result['edge']:10.4f}% "
            f"{brute / result['cpu']:15,.0f}x"
        )
    print(
        f"median {sorted(seconds)[len(seconds) // 2]:.2f} s, slowest {max(seconds):.2f} s "
        f"CPU per rule set ({len(seconds)} rule sets)"
    )


if __name__ == "__main__":
    main()
