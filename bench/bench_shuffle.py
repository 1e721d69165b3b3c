"""Time the fair shuffle and deal of one round (1 deck, 9 seats) against a plain baseline.

The baseline is the same Fisher-Yates and the same deal driven by ``secrets.randbelow``: what
an unverifiable but correct shuffle costs. Both run in the same process, interleaved, best of
several repeats, so the ratio holds on a noisy shared machine even when absolute figures
wander. Runs in a few seconds.

    .venv/bin/python bench/bench_shuffle.py [--rounds 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final

from gnau_service.fairness import CommittedRound, LockedSeat, deal_round_robin, shuffle_deck
from gnau_service.rules.cards import Card, standard_deck
from gnau_service.rules.house_rules import HouseRules

RULES: Final = HouseRules()
# v2 rounds: each seat names its player by a reference (fixed ones here; the service's are keyed).
SEATS: Final = tuple(LockedSeat(number, f"p-{number:032x}", 100) for number in range(1, 10))
SEAT_NUMBERS: Final = tuple(seat.seat_number for seat in SEATS)
TARGET_MICROSECONDS: Final = 1000.0


def secrets_shuffle(deck: Sequence[Card]) -> list[Card]:
    """Fisher-Yates from the OS CSPRNG: the baseline, not reproducible by anyone."""
    order = list(deck)
    for top in range(len(order) - 1, 0, -1):
        pick = secrets.randbelow(top + 1)
        order[top], order[pick] = order[pick], order[top]
    return order


def _best_seconds_per_round(run: Callable[[], None], rounds: int) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) / rounds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time the fair shuffle and deal.")
    parser.add_argument("--rounds", type=int, default=2000, help="rounds per repeat")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the best counts")
    args = parser.parse_args(argv)

    # Distinct seeds and locks, made before the clock starts: only shuffle and deal are timed.
    locked = [
        CommittedRound(f"bench/{index}", RULES, secrets.token_bytes(32)).lock(SEATS)
        for index in range(args.rounds)
    ]
    keys = [(round_.committed.server_seed, round_.transcript_hash) for round_ in locked]
    canonical = standard_deck()

    def fair() -> None:
        for seed, transcript_hash in keys:
            deal_round_robin(shuffle_deck(seed, transcript_hash, 1), SEAT_NUMBERS)

    def baseline() -> None:
        for _ in keys:
            deal_round_robin(secrets_shuffle(canonical), SEAT_NUMBERS)

    def whole_round() -> None:
        for round_ in locked:
            committed = round_.committed
            again = CommittedRound(committed.round_id, RULES, committed.server_seed)
            again.lock(SEATS).deal()

    timings: dict[str, list[float]] = {"fair": [], "baseline": [], "whole": []}
    for _ in range(args.repeats):  # interleaved, so drifts in machine load hit all alike
        timings["fair"].append(_best_seconds_per_round(fair, args.rounds))
        timings["baseline"].append(_best_seconds_per_round(baseline, args.rounds))
        timings["whole"].append(_best_seconds_per_round(whole_round, args.rounds))
    fair_s, baseline_s, whole_s = (min(timings[name]) for name in ("fair", "baseline", "whole"))

    print(f"shuffle + deal of one round: 1 deck, 9 seats; best of {args.repeats} x {args.rounds}")
    for label, seconds in (
        ("HMAC_DRBG Fisher-Yates (fair)", fair_s),
        ("secrets.randbelow Fisher-Yates", baseline_s),
    ):
        print(f"  {label + ':':32}{seconds * 1e6:8.1f} us/round {1 / seconds:10,.0f} shuffles/s")
    print(f"  ratio fair / secrets:           {fair_s / baseline_s:8.2f} x")
    print(
        f"  whole round (commit + lock + shuffle + deal): {whole_s * 1e6:.1f} us/round, "
        f"{1 / whole_s:,.0f} rounds/s"
    )
    within = fair_s * 1e6 < TARGET_MICROSECONDS
    print(f"  target < {TARGET_MICROSECONDS:.0f} us per round: {'met' if within else 'MISSED'}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
