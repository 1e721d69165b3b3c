"""Benchmark of the rules core: hands per second, and ``gnau stats`` time under every rule set.

Run with ``make bench-rules`` (or ``.venv/bin/python bench/bench_rules.py``). Every figure is
printed beside a baseline measured in the same run, since these machines are noisy:

- table evaluation (``Evaluator.rank`` and the full ``Evaluator.evaluate``) against the naive
  search over every ox choice and 3/6 value (``OxSearch.read``) on the same hands;
- ``gnau stats`` for one deck under all 16 evaluation settings, each in a fresh process, against
  ranking all 2,598,960 hands one by one;
- ``gnau evaluate`` of one hand as a whole process, against starting the interpreter alone
  (``python -c pass``) and importing the package (``python -c "import gnau_service"``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from gnau_service.rules.cards import Card, standard_deck
from gnau_service.rules.evaluation import Evaluator, OxSearch
from gnau_service.rules.house_rules import HouseRules


def random_hands(count: int) -> list[tuple[Card, ...]]:
    deck = list(standard_deck())
    hands = []
    for _ in range(count):
        # A partial Fisher-Yates from the OS CSPRNG: five distinct cards.
        for i in range(5):
            j = i + secrets.randbelow(len(deck) - i)
            deck[i], deck[j] = deck[j], deck[i]
        hands.append(tuple(deck[:5]))
    return hands


def hands_per_second(
    function: Callable[[Sequence[Card]], object], hands: list[tuple[Card, ...]], repeats: int
) -> float:
    """The best of ``repeats`` passes over ``hands``: the least disturbed by other work."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for hand in hands:
            function(hand)
        best = min(best, time.perf_counter() - started)
    return len(hands) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--process-runs", type=int, default=21)
    args = parser.parse_args()
    one_hand_process(args.process_runs)

    rules = HouseRules()
    evaluator, search = Evaluator(rules), OxSearch(rules)
    hands = random_hands(args.hands)
    naive_hands = hands[: max(args.hands // 20, 1000)]

    print(f"Evaluation of {len(hands):,} random one-deck hands (best of {args.repeats} passes)")
    table_rate = hands_per_second(evaluator.rank, hands, args.repeats)
    full_rate = hands_per_second(evaluator.evaluate, naive_hands, args.repeats)
    naive_rate = hands_per_second(search.read, naive_hands, args.repeats)
    print(f"  table rank (Evaluator.rank)           {table_rate:>12,.0f} hands/s")
    print(f"  table evaluation with ox/power cards  {full_rate:>12,.0f} hands/s")
    print(f"  naive search over every ox choice     {naive_rate:>12,.0f} hands/s (baseline)")
    print(f"  ratio table rank / naive search       {table_rate / naive_rate:>12.1f}x")
    print(f"  ratio full evaluation / naive search  {full_rate / naive_rate:>12.1f}x")

    print("\ngnau stats --json, one deck, every evaluation setting, each in a fresh process")
    computed, wall = [], []
    for flags in itertools.product(("false", "true"), repeat=4):
        keys = ("ten_is_duke", "three_six_pair", "trips_make_ox", "five_small")
        rule_args = [
            arg
            for key, flag in zip(keys, flags, strict=True)
            for arg in ("--rule", f"{key}={flag}")
        ]
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "gnau_service.cli.main", "stats", "--json", *rule_args],
            capture_output=True,
            check=True,
            text=True,
        )
        wall.append(time.perf_counter() - started)
        computed.append(json.loads(done.stdout)["seconds"])
    print(
        f"  computed (the command's own figure): median {statistics.median(computed):.3f} s, "
        f"slowest {max(computed):.3f} s   (target: under 0.5 s)"
    )
    print(
        f"  whole process, interpreter start included: median {statistics.median(wall):.3f} s, "
        f"slowest {max(wall):.3f} s"
    )
    started = time.perf_counter()
    rank = evaluator.rank
    for _ in map(rank, itertools.combinations(standard_deck(), 5)):
        pass
    brute = time.perf_counter() - started
    print(
        f"  baseline: ranking all 2,598,960 hands one by one takes {brute:.2f} s "
        f"({brute / statistics.median(computed):.0f}x the median computed time)"
    )


def process_seconds(command: Sequence[str], runs: int) -> list[float]:
    """Wall-clock seconds of ``runs`` fresh processes of ``command``, with bytecode caches as
    a user's installation has them (some shells here set PYTHONDONTWRITEBYTECODE)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=env)
        seconds.append(time.perf_counter() - started)
    return seconds


def one_hand_process(runs: int) -> None:
    print(f"\ngnau evaluate 3C 6S 8H 4H 8C, one hand, whole process (median of {runs} runs)")
    python = sys.executable
    commands = {
        "gnau evaluate 3C 6S 8H 4H 8C": [
            python, "-m", "gnau_service.cli.main", "evaluate", "3C", "6S", "8H", "4H", "8C",
        ],
        "python -c pass (baseline)": [python, "-c", "pass"],
        'python -c "import gnau_service" (baseline)': [python, "-c", "import gnau_service"],
    }  # fmt: skip
    # Interleaved rounds, so that a burst of other work on the machine hits all three alike.
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm up: bytecode caches written, files in memory
        process_seconds(command, 1)
    for _ in range(runs):
        for name, command in commands.items():
            seconds[name] += process_seconds(command, 1)
    medians = {name: statistics.median(times) for name, times in seconds.items()}
    for name, median in medians.items():
        print(f"  {name:<44} {median:.3f} s")
    evaluate, bare = medians["gnau evaluate 3C 6S 8H 4H 8C"], medians["python -c pass (baseline)"]
    print(
        f"  ratio evaluate / bare interpreter            {evaluate / bare:.1f}x   "
        "(target: under 0.3 s whole process)"
    )


if __name__ == "__main__":
    main()
