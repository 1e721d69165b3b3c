"""What naming a seat's player by reference costs at the deal, in CPU microseconds per seat.

The reference, :func:`~gnau_service.fairness.player_refs.player_ref` (the HMAC-SHA-256 of the
round id and seat number under the player's key), against a same-run baseline: one seat's share
of the round's v2 lock, shuffle and deal (9 seats, 1 deck), the work the deal does anyway. Both
in the same process, interleaved, best of several repeats (CPU time, so the ratio holds on a
noisy shared machine). The private rows the deal also writes per seat (the player's key, read or
created, and the seat's link) are part of the deal's store transaction, which
``bench/bench_service.py`` measures whole.

    .venv/bin/python bench/bench_player_refs.py [--rounds 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final

from gnau_service.fairness import CommittedRound, LockedSeat
from gnau_service.fairness.player_refs import new_player_key, player_ref
from gnau_service.rules.house_rules import HouseRules

RULES: Final = HouseRules()
SEATS_PER_ROUND: Final = 9


def _cpu_seconds(run: Callable[[], None]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time the player reference at the deal.")
    parser.add_argument("--rounds", type=int, default=2000, help="rounds per repeat")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the best counts")
    args = parser.parse_args(argv)

    keys = [new_player_key() for _ in range(SEATS_PER_ROUND)]
    rounds = [(f"r-{secrets.token_hex(12)}", secrets.token_bytes(32)) for _ in range(args.rounds)]

    def references() -> None:
        for round_id, _ in rounds:
            for number, key in enumerate(keys, start=1):
                player_ref(key, round_id, number)

    seats = tuple(LockedSeat(n, f"p-{n:032x}", 100) for n in range(1, SEATS_PER_ROUND + 1))

    def deals() -> None:
        for round_id, seed in rounds:
            CommittedRound(round_id, RULES, seed).lock(seats).deal()

    best = {"reference": float("inf"), "deal": float("inf")}
    for _ in range(args.repeats):
        best["reference"] = min(best["reference"], _cpu_seconds(references))
        best["deal"] = min(best["deal"], _cpu_seconds(deals))
    seats_timed = args.rounds * SEATS_PER_ROUND
    reference_us = best["reference"] / seats_timed * 1e6
    deal_us = best["deal"] / seats_timed * 1e6
    print(f"{'':34}{'CPU us/seat':>12}")
    print(f"{'player reference (HMAC-SHA-256)':34}{reference_us:12.2f}")
    print(f"{'baseline: its share of lock+deal':34}{deal_us:12.2f}")
    print(f"ratio reference / baseline: {reference_us / deal_us:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
