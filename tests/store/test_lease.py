"""The sequencer's lease on PostgreSQL (gnau_service/store/lease.py): a leader that stops, in a
transaction or outside one, loses the log within the bound and another process takes over; a
deposed leader commits nothing; a killed one is replaced at the next election; and a log whose
lease nobody can take is reported stalled, its callers answered LOG_STALLED.

Each "frozen leader" here is a real sequencer work session (the production connection, with its
timeouts) driven by the test, which simply stops sending on it, as a stopped process does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any, Final

import psycopg
import pytest

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.store import LogStalled, Store
from gnau_service.store.lease import (
    ELECTION_SECONDS,
    PROGRESS_SQL,
    Deposed,
    Lease,
    stall_bound,
    takeover_bound,
)
from gnau_service.store.postgres import PostgresBackend
from gnau_service.store.schema import create_schema
from gnau_service.store.sequencer import sequence
from tests.postgres import OutsideLeader, fresh_database
from tests.steps import append

#: A short lease, so that each test waits a few seconds, not the default's five.
LEASE: Final = 2.0
#: Slack for this noisy two-core machine on top of a stated bound (a liveness bound, not a
#: speed claim: the benchmark measures the takeover).
SLACK: Final = 1.5


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


def short_lease_store(url: str, signer: LogSigner) -> Store:
    return Store(PostgresBackend(url, lease_seconds=LEASE), signer)


def lease_row(url: str) -> tuple[int, str]:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT epoch, holder FROM log_lease WHERE id = 1").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


class FrozenLeader:
    """A sequencer work session that took the lease and then stops, as a frozen process's
    would: the backend's own connection, timeouts and statements, driven by the test."""

    def __init__(self, url: str) -> None:
        self.backend = PostgresBackend(url, lease_seconds=LEASE)
        connection = self.backend.connect()
        create_schema(self.backend, connection)
        connection.close()
        self.work: Any = self.backend.connect_sequencer("frozen-leader", work=True)
        lease = self.backend.take_lease(self.work, "frozen-leader")
        assert lease is not None, "a new log's lease is free"
        self.lease: Lease = lease

    def stop_inside_an_integration(self) -> None:
        """Begin an integration (head lock, renewal) and send nothing more."""
        self.work.execute("BEGIN")
        self.work.execute(self.backend.read_head_sql)
        assert self.work.execute(*self.lease.renewal()).fetchone() is not None

    def close(self) -> None:
        self.work.close()
        self.backend.close()


def takeover_seconds(store: Store, since: float) -> float:
    """Wait until ``store`` leads; how long after ``since`` that was."""
    deadline = since + 60  # a liveness bound
    while not store.leading:
        assert time.monotonic() < deadline, "the store never took the lease"
        time.sleep(0.02)
    return time.monotonic() - since


def test_a_leader_frozen_inside_an_integration_loses_the_log_within_the_bound(
    postgres_url: str, signer: LogSigner
) -> None:
    frozen = FrozenLeader(postgres_url)
    try:
        frozen.stop_inside_an_integration()
        stopped = time.monotonic()
        with short_lease_store(postgres_url, signer) as store:
            # It holds the head and the lease rows in its open transaction, and renewed just
            # now: nobody may take over before the lease ends...
            time.sleep(LEASE / 2)
            assert not store.leading
            took = takeover_seconds(store, stopped)
            entry = append(store, EntryKind.CONFIG_CHANGED, {"after": "takeover"})
            # ...and PostgreSQL ends its transaction by then, so the next one may.
            assert LEASE - 0.2 < took < takeover_bound(LEASE) + SLACK, took
            assert entry.index == 0  # the log's first entry
            assert lease_row(postgres_url)[0] == frozen.lease.epoch + 1
            # The frozen session was ended: when its process resumes, it can commit nothing.
            with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
                frozen.work.execute("COMMIT")
    finally:
        frozen.close()


def test_a_leader_frozen_between_integrations_loses_the_log_within_the_bound(
    postgres_url: str, signer: LogSigner
) -> None:
    frozen = FrozenLeader(postgres_url)  # took the lease, and renews it no more
    stopped = time.monotonic()
    try:
        with short_lease_store(postgres_url, signer) as store:
            took = takeover_seconds(store, stopped)
            assert LEASE - 0.2 < took < takeover_bound(LEASE) + SLACK, took
            size = store.size()
            append(store, EntryKind.CONFIG_CHANGED, {"after": "takeover"})
            assert store.size() == size + 1
            # Resumed, the deposed leader's next integration is fenced off: rolled back, with
            # nothing written.
            with pytest.raises(Deposed):
                sequence(frozen.backend, frozen.work, lambda key: signer, lease=frozen.lease)
            assert store.size() == size + 1
    finally:
        frozen.close()


def test_a_leader_whose_session_ended_is_replaced_at_the_next_election(
    postgres_url: str, signer: LogSigner
) -> None:
    frozen = FrozenLeader(postgres_url)
    with short_lease_store(postgres_url, signer) as store:
        time.sleep(ELECTION_SECONDS)  # its candidate has tried, and found the lease held
        assert not store.leading
        frozen.close()  # a killed process: its sessions end at once, its lease has not expired
        ended = time.monotonic()
        took = takeover_seconds(store, ended)
        assert took < ELECTION_SECONDS + SLACK < LEASE + ELECTION_SECONDS, took


def test_a_deposed_sequencer_commits_nothing_and_steps_down(
    postgres_url: str, signer: LogSigner
) -> None:
    with short_lease_store(postgres_url, signer) as store:
        takeover_seconds(store, time.monotonic())
        append(store, EntryKind.CONFIG_CHANGED, {"i": 0})
        size = store.size()
        outside = OutsideLeader(postgres_url)  # takes the lease over, as a successor would
        try:
            loop = asyncio.new_event_loop()
            waiting = loop.create_task(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"i": 1}))
            )
            loop.run_until_complete(asyncio.sleep(0.5))
            # The step committed to the outbox; its process's sequencer found itself deposed
            # and integrated nothing.
            assert not waiting.done()
            assert store.size() == size
            assert not store.leading
            assert lease_row(postgres_url)[1] == "outside"
        finally:
            outside.release()
        loop.run_until_complete(asyncio.wait_for(waiting, takeover_bound(LEASE) + SLACK))
        loop.close()
        assert store.size() == size + 1


def test_a_log_nobody_can_sequence_is_reported_stalled(
    postgres_url: str, signer: LogSigner
) -> None:
    outside = OutsideLeader(postgres_url)  # holds the lease for good, and integrates nothing
    try:
        with short_lease_store(postgres_url, signer) as store:
            assert store.stall_seconds == stall_bound(LEASE) == LEASE + ELECTION_SECONDS + 1
            assert not store.stalled()
            began = time.monotonic()
            with pytest.raises(LogStalled, match="retry of the same request gets its answer"):
                append(store, EntryKind.CONFIG_CHANGED, {"i": 0})
            waited = time.monotonic() - began
            assert stall_bound(LEASE) <= waited < stall_bound(LEASE) + SLACK, waited
            # The caller was answered, but the event still waits in the outbox: the log is
            # stalled, by this process's reading of the database, until someone integrates it.
            assert store.integration_wait() > stall_bound(LEASE)
            assert store.stalled()
            progress = store.log_progress()
            assert progress is not None and progress.holder == "outside"
            assert progress.lease_age > stall_bound(LEASE) - 1
            assert not store.leading
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            row = connection.execute(PROGRESS_SQL).fetchone()
        assert row is not None and row[4] > stall_bound(LEASE)  # the outbox's oldest wait
    finally:
        outside.release()


def test_elections_never_wait_for_a_locked_lease(postgres_url: str) -> None:
    """A candidate that finds the lease's row locked (a leader inside an integration) skips it
    at once: its thread, which also answers its callers, never blocks on the row."""
    frozen = FrozenLeader(postgres_url)
    try:
        # Expired, but locked by an open transaction of its holder.
        frozen.work.execute("UPDATE log_lease SET expires_at = clock_timestamp() WHERE id = 1")
        frozen.work.execute("BEGIN")
        frozen.work.execute("SELECT 1 FROM log_lease WHERE id = 1 FOR UPDATE")
        candidate = frozen.backend.connect_sequencer("candidate", work=True)
        try:
            began = time.monotonic()
            assert frozen.backend.take_lease(candidate, "candidate") is None
            assert time.monotonic() - began < 0.5
        finally:
            candidate.close()
    finally:
        frozen.close()


def test_a_frozen_step_holds_its_rounds_row_for_the_lease_at_most(postgres_url: str) -> None:
    """A step writer's session ends a transaction idle for the lease, as the sequencer's does
    (proved above): a frozen replica's step blocks its round's next step for that long only."""
    backend = PostgresBackend(postgres_url, lease_seconds=LEASE)
    try:
        writer = backend.connect_step_writer()
        row = writer.execute("SHOW idle_in_transaction_session_timeout").fetchone()
        writer.close()
    finally:
        backend.close()
    assert row == (f"{int(LEASE)}s",)
