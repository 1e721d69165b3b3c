"""The database survives losing its primary: two replicas under load on a PostgreSQL primary
with a synchronous standby; the primary is killed (SIGKILL to every process of it), the standby
promoted, and the replicas find it through their multi-host URL. Every acknowledged step is in
the log, the log verifies, and it extends every checkpoint handed out before the kill.

Slow (two clusters made and started, two services, the load, the checks), so ``make test-slow``
runs it; ``bench/bench_failover.py`` runs the same drill and prints the
recovery time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failover_drill import run_drill

PROMOTE_DELAY = 2.0  # seconds


@pytest.mark.slow
def test_the_log_survives_losing_the_primary(tmp_path: Path) -> None:
    # The standby is promoted a while after the kill, as an operator or a failover manager
    # would: meanwhile the replicas refuse calls with UNAVAILABLE and probe for the store.
    outcome = run_drill(tmp_path, promote_delay=PROMOTE_DELAY)
    print(
        f"\n{outcome.acknowledged_steps} steps acknowledged, {len(outcome.lost)} lost;"
        f" promoted {outcome.promote_seconds:.1f} s after the kill; rounds flowing on every"
        f" replica {outcome.recovery_seconds:.1f} s after it;"
        f" retries {[player.retries for player in outcome.players]}"
    )
    assert [player.failures for player in outcome.players] == [[], []]
    for player in outcome.players:
        assert player.first_ack_sent_after(outcome.killed) is not None, player.name
        assert player.rounds_settled() > 0, player.name
    assert outcome.lost == []
    assert outcome.verify_status == 0, outcome.verify_output
    # Every round a player started, it finished: none is left open in the log.
    settled = sum(player.rounds_settled() for player in outcome.players)
    assert (outcome.rounds_settled_in_log, outcome.rounds_open_in_log) == (settled, 0)
    assert outcome.checkpoints_checked, "no checkpoint was seen before the kill"
    assert outcome.checkpoint_failures == []
    assert outcome.promote_seconds >= PROMOTE_DELAY
    for output in outcome.replica_output:
        assert "Traceback" not in output
        # The outage was seen, and its end found by the store probe
        # (server/process/store_health.py).
        assert "storage unavailable" in output
        assert "storage available again" in output
