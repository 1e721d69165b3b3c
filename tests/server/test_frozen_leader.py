"""A frozen sequencer (tests/frozen_leader.py): stopped inside its transaction, between
transactions, or with its database connection as good as cut, for longer than its lease, under
load on three replicas. The log must grow again through another replica within the takeover
bound plus a second; no acknowledged step may be lost; and once resumed, the old leader commits
nothing (its epoch is fenced off, or its session was ended), so the log verifies.

The default run freezes the leader inside its transaction once, with a 2 s lease; ``make
test-slow`` runs every kind of freeze with a longer hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gnau_service.store.lease import takeover_bound
from tests.frozen_leader import Freeze, Outcome, replicas, run_freeze
from tests.postgres import fresh_database

#: What the issue allows beyond the bound: "within the bound plus one second".
BEYOND_BOUND = 1.0
#: The old leader's own log says how it found out it no longer leads.
STEPPED_DOWN = ("sequencer stepping down", "sequencer connection failed")


def check(outcome: Outcome, lease_seconds: float) -> None:
    print(
        f"\n{outcome.freeze}: the log grew again {outcome.takeover_seconds:.2f} s after the"
        f" freeze (bound {takeover_bound(lease_seconds):.1f} s); epoch {outcome.epochs};"
        f" {outcome.acknowledged_steps} steps acknowledged"
    )
    assert outcome.takeover_seconds < takeover_bound(lease_seconds) + BEYOND_BOUND
    assert all(outcome.flowing), outcome.flowing
    assert outcome.epochs[1] > outcome.epochs[0]
    assert outcome.failures == []
    assert outcome.lost == []
    assert outcome.verified
    assert any(line in outcome.frozen_output for line in STEPPED_DOWN), outcome.frozen_output[
        -3000:
    ]


def test_a_leader_frozen_inside_its_transaction_is_replaced_within_the_bound(
    tmp_path: Path,
) -> None:
    lease = 2.0
    with fresh_database() as url, replicas(tmp_path, url, lease) as services:
        outcome = run_freeze(
            services, url, Freeze.IN_TRANSACTION, lease_seconds=lease, hold_seconds=lease + 1.5
        )
    check(outcome, lease)


@pytest.mark.slow
@pytest.mark.parametrize("how", list(Freeze))
def test_a_frozen_leader_is_replaced_within_the_bound_however_it_froze(
    tmp_path: Path, how: Freeze
) -> None:
    lease = 3.0
    with fresh_database() as url, replicas(tmp_path, url, lease) as services:
        for _ in range(2):  # the second freeze is of the new leader
            outcome = run_freeze(
                services, url, how, lease_seconds=lease, hold_seconds=2 * lease + 2
            )
            check(outcome, lease)
