"""Losing the PostgreSQL primary under load: how long until rounds flow again, and what is lost.

Run: ``.venv/bin/python bench/bench_failover.py [--runs N] [--promote-delay S]`` (about 30 s a
run). Needs the PostgreSQL 15 server binaries (Debian: ``postgresql-15``, in
/usr/lib/postgresql/15/bin); run as root, the clusters run as the ``postgres`` user.

Each run (tests/failover_drill.py): a primary and a synchronous streaming standby in temporary
directories; two ``gnau serve`` replicas on one log, one key, with the multi-host URL
``postgresql://postgres@PRIMARY,STANDBY/gnau?target_session_attrs=read-write``; a client per
replica plays rounds step by step, retrying UNAVAILABLE with the same request id. After the
warm-up the primary gets SIGKILL (every process of it), the standby is promoted with
``pg_ctl promote`` after ``--promote-delay`` seconds, and the load goes on.

Printed per run: the kill to the promotion, the kill to the moment every replica had a step
sent after the kill acknowledged ("rounds flow again"), the acknowledged steps and how many of
them the log lacks (must be 0), whether the exported log verifies and extends the checkpoints
seen before the kill, and the steps per second before the kill and after the recovery (the
same-run baseline: the new primary serves as fast as the old one; the machine is noisy).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.failover_drill import Outcome, run_drill
from tests.replication import missing_reason


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm-up", type=float, default=5.0, help="seconds of load before")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of load after")
    parser.add_argument("--promote-delay", type=float, default=0.0, help="kill to promote")
    args = parser.parse_args()
    reason = missing_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    recoveries = []
    clean = True
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="gnau-bench-failover-") as work:
            outcome = run_drill(
                Path(work),
                warm_up_seconds=args.warm_up,
                after_seconds=args.after,
                promote_delay=args.promote_delay,
            )
        recoveries.append(outcome.recovery_seconds)
        clean = report(run, outcome, args.after) and clean
    print(
        f"\nkill to rounds flowing on every replica: median {statistics.median(recoveries):.2f} s,"
        f" worst {max(recoveries):.2f} s over {len(recoveries)} runs"
        f" (promotion {args.promote_delay:.1f} s after the kill)"
    )
    return 0 if clean else 1


def report(run: int, outcome: Outcome, after_seconds: float) -> bool:
    before = sum(p.steps_between(outcome.started, outcome.killed) for p in outcome.players)
    back = outcome.killed + outcome.recovery_seconds
    after = sum(p.steps_between(back, back + after_seconds) for p in outcome.players)
    rate_before = before / (outcome.killed - outcome.started)
    rate_after = after / after_seconds
    failures = [f for p in outcome.players for f in p.failures]
    verified = outcome.verify_status == 0 and not outcome.checkpoint_failures
    print(
        f"run {run}: promoted {outcome.promote_seconds:.2f} s after the kill; rounds flowing on"
        f" every replica after {outcome.recovery_seconds:.2f} s"
        f" ({', '.join(f'{s:.2f}' for s in outcome.recovered)} s per replica);"
        f" {outcome.acknowledged_steps} steps acknowledged, {len(outcome.lost)} lost;"
        f" log {outcome.log_size} entries {'VALID' if verified else 'INVALID'}, extends"
        f" {len(outcome.checkpoints_checked)} checkpoints seen before the kill"
        f" (sizes {outcome.checkpoints_checked}); steps/s before {rate_before:.0f},"
        f" after {rate_after:.0f} (ratio {rate_after / rate_before:.2f});"
        f" client retries {sum(p.retries for p in outcome.players)}"
    )
    for failure in failures + outcome.lost + outcome.checkpoint_failures:
        print(f"  ! {failure}")
    return verified and not outcome.lost and not failures


if __name__ == "__main__":
    sys.exit(main())
