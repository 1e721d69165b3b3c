"""Write gnau_service/rules/return_to_player.csv: every rule set's exact return to player.

``make rtp-table`` computes the exact PAR sheet of each rule set (``par_sheet``, docs/par.md) in
``--processes`` worker processes and writes the table the service discloses from, so that no
figure is computed while a client waits. tests/rules/test_rtp_table.py recomputes a sample of it
on every run, all of it under ``make test-slow``, and holds it to the sheets published in
docs/par/; rerun this after any change to the rules, the settlement or the sheet.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time
from fractions import Fraction
from pathlib import Path

from gnau_service.rules.house_rules import HouseRules, every_rule_set
from gnau_service.rules.par import par_sheet
from gnau_service.rules.return_to_player import TABLE, table_text

OUT = Path(__file__).resolve().parents[1] / "gnau_service" / "rules" / TABLE


def rtp_of(rules: HouseRules) -> Fraction:
    return par_sheet(rules).rtp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = parser.parse_args()
    rule_sets = every_rule_set()
    started = time.perf_counter()
    figures = {}
    with multiprocessing.Pool(args.processes) as pool:
        computed = zip(rule_sets, pool.imap(rtp_of, rule_sets), strict=True)
        for done, (rules, rtp) in enumerate(computed, start=1):
            figures[rules] = rtp
            if done % 128 == 0:
                print(
                    f"{done}/{len(rule_sets)} in {time.perf_counter() - started:.0f} s", flush=True
                )
    wall = time.perf_counter() - started
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    args.out.write_text(table_text(figures), encoding="ascii")
    print(
        f"{args.out}: {len(figures)} rule sets in {wall:.0f} s "
        f"({cpu:.0f} s of CPU in {args.processes} processes)"
    )


if __name__ == "__main__":
    main()
