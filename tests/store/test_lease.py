"""The sequencer's lease on PostgreSQL (gnau_service/store/lease.py): a leader that stops, in a
transaction or outside one, loses the log within the bound and another process takes over; a
deposed leader commits nothing; a killed one is replaced at the next election; and a log whose
lease nobody can take is reported stalled, its callers answered LOG_STALLED.

Each "frozen leader" here is a real sequencer work session (the production connection, with its
timeouts) driven by the test, which simply stops sending on it, as a stopped process does: between
statements, or where the backend waits on its client in the middle of one, beyond the reach of
its timeouts (inside a COPY, in a pipeline before its Sync, writing a result nobody reads). The
same holds for the other transactions that hold the log head: a key rotation, and a migration.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.store import LogStalled, Store
from gnau_service.store.connections import Row
from gnau_service.store.errors import StoreError, StoreUnavailable
from gnau_service.store.lease import (
    ELECTION_SECONDS,
    PROGRESS_SQL,
    Deposed,
    Lease,
    stall_bound,
    takeover_bound,
)
from gnau_service.store.migrations import MIGRATIONS, Migration
from gnau_service.store.postgres import PostgresBackend
from gnau_service.store.schema import create_schema
from gnau_service.store.sequencer import sequence
from tests.postgres import OutsideLeader, fresh_database
from tests.steps import append

# make test-system: the lease, expired and renewed on real timers.
pytestmark = pytest.mark.system

#: A short lease, so that each test waits a few seconds, not the default's five.
LEASE: Final = 2.0
#: Slack for this noisy two-core machine on top of a stated bound (a liveness bound, not a
#: speed claim: the benchmark measures the takeover).
SLACK: Final = 1.5
#: What a replica logs about a session it must end (step 4 of the lease's protocol), as
#: docs/operations.md ("A stalled log") quotes it: ended; cannot see it; may not end it; it did
#: not end (a stopped backend).
ENDED: Final = "whose transaction held the log's lease past its expiry"
CANNOT_SEE: Final = "cannot see when its transaction began"
CANNOT_END: Final = "cannot end the session that holds the log's expired lease"
DID_NOT_END: Final = "did not end when asked"


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
        self.pid: int = self.work.info.backend_pid
        self._copy: Any = None
        lease = self.backend.take_lease(self.work, "frozen-leader")
        assert lease is not None, "a new log's lease is free"
        self.lease: Lease = lease

    def stop_inside_an_integration(self) -> None:
        """Begin an integration (head lock, renewal) and send nothing more."""
        self.work.execute("BEGIN")
        self.work.execute(self.backend.read_head_sql)
        assert self.work.execute(*self.lease.renewal()).fetchone() is not None

    def stop_in_a_pipeline(self) -> None:
        """Inside an integration, send one statement of an extended-protocol pipeline and not its
        Sync: PostgreSQL disarms the statement timeout after the Execute, and arms the idle one
        only at the ReadyForQuery that the Sync would bring."""
        self.stop_inside_an_integration()
        connection = self.work.pgconn
        connection.enter_pipeline_mode()
        connection.send_query_params(b"SELECT 1", None)
        connection.flush()

    def stop_reading_a_result(self) -> None:
        """Inside an integration, ask for a result larger than the sockets hold and not read it:
        the backend blocks writing it to its client."""
        self.stop_inside_an_integration()
        # Rows of 1 MB: the sockets are full after a few, long before any timeout.
        self.work.pgconn.send_query(b"SELECT repeat('x', 1000000) FROM generate_series(1, 5000)")
        with psycopg.connect(self.backend.url, autocommit=True) as observer:
            until(
                lambda: (
                    observer.execute(
                        "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (self.pid,)
                    ).fetchone()
                    == ("ClientWrite",)
                ),
                "the backend blocks writing the result",
            )

    def stop_inside_a_copy(self) -> None:
        """Inside an integration, begin the COPY of its entries and send no row: the backend
        waits for its client in the middle of the COPY."""
        self.stop_inside_an_integration()
        self._copy = self.work.cursor().copy(
            b"COPY log_entries (idx, kind, round_id, data) FROM STDIN (FORMAT BINARY)"
        )
        self._copy.__enter__()

    def close(self) -> None:
        if self._copy is not None:
            with contextlib.suppress(psycopg.Error):  # its session was ended
                self._copy.__exit__(None, None, None)
        self.work.close()
        self.backend.close()


class StopsInItsCopy(PostgresBackend):
    """A backend whose first COPY of log entries stops after its first row until released, as a
    process stopped there would: its backend waits for the rest in the middle of the COPY. The
    process's other threads carry on, which a SIGSTOP would stop too (tests/frozen_leader.py
    stops real processes)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, lease_seconds=LEASE)
        self.stopped = threading.Event()
        self.resume = threading.Event()
        self.resumed: BaseException | None = None  # what the stopped COPY raised on resuming

    def insert_rows(self, connection: Any, table: str, columns: Any, rows: Sequence[Row]) -> None:
        if table != "log_entries" or self.stopped.is_set():
            super().insert_rows(connection, table, columns, rows)
            return

        def stopping() -> Iterator[Row]:
            yield rows[0]
            self.stopped.set()
            self.resume.wait(timeout=60)  # a liveness bound: a failing test ends too
            yield from rows[1:]

        try:
            super().insert_rows(connection, table, columns, stopping())  # type: ignore[arg-type]
        except BaseException as error:
            self.resumed = error
            raise


def takeover_seconds(store: Store, since: float) -> float:
    """Wait until ``store`` leads; how long after ``since`` that was."""
    deadline = since + takeover_bound(LEASE) + SLACK + 5  # a liveness bound
    while not store.leading:
        assert time.monotonic() < deadline, "the store never took the lease"
        time.sleep(0.02)
    return time.monotonic() - since


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30  # a liveness bound
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def session_ended(url: str, pid: int) -> bool:
    """Whether PostgreSQL ended the session of backend ``pid`` (its client, stopped, cannot
    tell yet). A terminated backend leaves pg_stat_activity only as it exits, which can be
    after its locks are gone and the log taken over: ask with :func:`until`."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        return row.fetchone() == (0,)


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


@pytest.mark.parametrize(
    "stop", ["stop_inside_a_copy", "stop_in_a_pipeline", "stop_reading_a_result"]
)
def test_a_leader_whose_backend_waits_on_it_mid_statement_loses_the_log_within_the_bound(
    postgres_url: str, signer: LogSigner, stop: str
) -> None:
    """No timeout of its session ends these: the next process to try for the lease ends it."""
    frozen = FrozenLeader(postgres_url)
    try:
        getattr(frozen, stop)()
        stopped = time.monotonic()
        with short_lease_store(postgres_url, signer) as store:
            took = takeover_seconds(store, stopped)
            append(store, EntryKind.CONFIG_CHANGED, {"after": "takeover"})
            assert LEASE - 0.2 < took < takeover_bound(LEASE) + SLACK, took
            assert lease_row(postgres_url)[0] == frozen.lease.epoch + 1
            until(lambda: session_ended(postgres_url, frozen.pid), "the frozen session is gone")
    finally:
        with contextlib.suppress(psycopg.Error):
            frozen.close()


def test_a_sequencer_stopped_inside_its_copy_is_replaced_and_then_follows(
    postgres_url: str, signer: LogSigner
) -> None:
    """The production sequencer, stopped in the middle of its integration's COPY: another store
    takes over within the bound; resumed, the stopped one finds its session ended, commits
    nothing, follows, and its caller is answered with the index the new leader gave its event."""
    stopping = StopsInItsCopy(postgres_url)
    with Store(stopping, signer) as frozen:
        takeover_seconds(frozen, time.monotonic())
        answer: list[Any] = []
        caller = threading.Thread(
            target=lambda: answer.append(append(frozen, EntryKind.CONFIG_CHANGED, {"i": 0})),
            daemon=True,
        )
        caller.start()
        until(stopping.stopped.is_set, "the sequencer is inside its COPY")
        stopped = time.monotonic()
        with short_lease_store(postgres_url, signer) as store:
            took = takeover_seconds(store, stopped)
            after = append(store, EntryKind.CONFIG_CHANGED, {"i": 1})
            assert LEASE - 0.2 < took < takeover_bound(LEASE) + SLACK, took
            stopping.resume.set()
            caller.join(timeout=30)
            assert isinstance(stopping.resumed, psycopg.OperationalError), stopping.resumed
            assert not frozen.leading
            # Its event is in the log once, at the index its caller was given, before the
            # next store's own.
            assert answer and answer[0].index == after.index - 1, (answer, after)
            assert store.size() == after.index + 1
            # It follows: its next step is integrated by the leader.
            assert append(frozen, EntryKind.CONFIG_CHANGED, {"i": 2}).index == after.index + 1
            assert store.leading and not frozen.leading


def test_a_key_rotation_stopped_inside_its_copy_holds_the_log_for_the_lease_at_most(
    postgres_url: str, signer: LogSigner
) -> None:
    """A rotation writes the log without the lease, under the head lock: it holds the lease's
    row too, so a rotation stopped inside it is ended like a stopped sequencer, rotates nothing,
    and its command gets a clean, retryable refusal."""
    with short_lease_store(postgres_url, signer) as leader:
        takeover_seconds(leader, time.monotonic())
        append(leader, EntryKind.CONFIG_CHANGED, {"before": "rotation"})
        stopping = StopsInItsCopy(postgres_url)
        with Store(stopping, signer) as rotating:
            refused: list[BaseException] = []

            def rotate() -> None:
                new = LogSigner.from_private_key(signer.origin, Ed25519PrivateKey.generate())
                try:
                    rotating.rotate_key(new)
                except StoreError as error:
                    refused.append(error)

            rotation = threading.Thread(target=rotate, daemon=True)
            rotation.start()
            until(stopping.stopped.is_set, "the rotation is inside its COPY")
            stopped = time.monotonic()
            # The log goes on within the bound, signed with the old key.
            after = append(leader, EntryKind.CONFIG_CHANGED, {"during": "rotation"})
            waited = time.monotonic() - stopped
            assert waited < takeover_bound(LEASE) + SLACK, waited
            stopping.resume.set()
            rotation.join(timeout=30)
        assert refused and isinstance(refused[0], StoreUnavailable), refused
        assert leader.current_key() == signer.vkey
        assert append(leader, EntryKind.CONFIG_CHANGED, {"i": 1}).index == after.index + 1


def test_a_stopped_schema_change_holds_the_log_for_the_lease_at_most(
    postgres_url: str, signer: LogSigner
) -> None:
    """A migration holds the log head for the whole schema change: a client that stops inside
    it (``gnau db migrate`` suspended) is ended after the lease, and the log goes on."""
    with short_lease_store(postgres_url, signer) as store:
        takeover_seconds(store, time.monotonic())
        backend = PostgresBackend(postgres_url, lease_seconds=LEASE)
        connection = backend.connect()
        try:
            with (
                pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout),
                backend.schema_change(connection),
            ):
                stopped = time.monotonic()
                append(store, EntryKind.CONFIG_CHANGED, {"during": "migration"})
                waited = time.monotonic() - stopped
        finally:
            connection.close()
            backend.close()
        assert LEASE - 0.2 < waited < LEASE + SLACK, waited


def test_a_schema_change_waits_for_a_backups_lock_for_the_lease_at_most(
    postgres_url: str, signer: LogSigner
) -> None:
    """A migration that must wait for a table a long reader holds (a pg_dump, which turns every
    timeout of its own session off, stopped) gives up after the lease, letting the head go."""
    with short_lease_store(postgres_url, signer) as store:
        takeover_seconds(store, time.monotonic())
        with psycopg.connect(postgres_url) as backup:
            backup.execute("SELECT 1 FROM player_keys LIMIT 1")  # ACCESS SHARE, to its end
            newer = (
                *MIGRATIONS,
                Migration(
                    len(MIGRATIONS) + 1, "waits", "Waits for the backup.", "SELECT 1;",
                    "ALTER TABLE player_keys ADD COLUMN IF NOT EXISTS waits INTEGER;",
                ),
            )  # fmt: skip
            backend = PostgresBackend(postgres_url, migrations=newer, lease_seconds=LEASE)
            refused: list[BaseException] = []

            def migrate() -> None:
                connection = backend.connect()
                try:
                    create_schema(backend, connection, migrate=True)
                except StoreError as error:
                    refused.append(error)
                finally:
                    connection.close()

            migration = threading.Thread(target=migrate, daemon=True)
            began = time.monotonic()
            migration.start()
            append(store, EntryKind.CONFIG_CHANGED, {"during": "migration"})
            waited = time.monotonic() - began
            migration.join(timeout=30)
            backend.close()
        assert waited < LEASE + SLACK, waited
        assert refused and "lock timeout" in str(refused[0]), refused


@contextlib.contextmanager
def ordinary_roles(url: str, count: int) -> Iterator[list[tuple[str, str]]]:
    """``count`` new login roles, neither superuser nor owner, that may use the log's tables
    (made here first), each with the URL that connects to ``url``'s database as it: as a
    deployment's service role would. Dropped afterwards."""
    OutsideLeader(url).release()  # the schema, made by the administrator
    names = [f"gnau_role_{secrets.token_hex(4)}" for _ in range(count)]
    with psycopg.connect(url, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE ROLE {name} LOGIN")
            admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {name}")
            admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {name}")
    base, database = url.rsplit("/", 1)
    host = base.rsplit("@", 1)[1]
    try:
        yield [(name, f"postgresql://{name}@{host}/{database}") for name in names]
    finally:
        with psycopg.connect(url, autocommit=True) as admin:  # its grants are in this database
            for name in names:
                admin.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                    " WHERE usename = %s",
                    (name,),
                )
                admin.execute(f"DROP OWNED BY {name}")
                admin.execute(f"DROP ROLE {name}")


def test_a_stopped_leader_is_ended_by_a_process_of_the_same_ordinary_role(
    postgres_url: str, signer: LogSigner
) -> None:
    """No superuser, no grant: a role may end its own sessions."""
    with ordinary_roles(postgres_url, 1) as [(_, url)]:
        frozen = FrozenLeader(url)
        try:
            frozen.stop_inside_a_copy()
            stopped = time.monotonic()
            with short_lease_store(url, signer) as store:
                took = takeover_seconds(store, stopped)
                assert took < takeover_bound(LEASE) + SLACK, took
                until(lambda: session_ended(postgres_url, frozen.pid), "the frozen session is gone")
        finally:
            with contextlib.suppress(psycopg.Error):
                frozen.close()


def test_a_stopped_leader_of_another_role_is_ended_once_granted_the_right(
    postgres_url: str, signer: LogSigner, caplog: pytest.LogCaptureFixture
) -> None:
    """Another role must see the stopped session's transaction (pg_read_all_stats) and may
    signal it (pg_signal_backend): until it has both, each lack is logged once and nothing is
    ended (the log stalls, and says so); then the next election ends it and takes over."""
    with ordinary_roles(postgres_url, 2) as [(_, frozen_url), (follower, follower_url)]:
        frozen = FrozenLeader(frozen_url)
        try:
            frozen.stop_inside_a_copy()
            with short_lease_store(follower_url, signer) as store:
                for grant, lacking in [
                    ("pg_read_all_stats", CANNOT_SEE),
                    ("pg_signal_backend", CANNOT_END),
                ]:
                    until(lambda lacking=lacking: lacking in caplog.text, f"logged: {lacking}")
                    assert not store.leading and not session_ended(postgres_url, frozen.pid)
                    with psycopg.connect(postgres_url, autocommit=True) as admin:
                        admin.execute(f"GRANT {grant} TO {follower}")
                granted = time.monotonic()
                took = takeover_seconds(store, granted)
                assert took < ELECTION_SECONDS + SLACK, took
                until(lambda: session_ended(postgres_url, frozen.pid), "the frozen session is gone")
            assert caplog.text.count(CANNOT_SEE) == 1 and caplog.text.count(CANNOT_END) == 1
            assert ENDED in caplog.text
        finally:
            with contextlib.suppress(psycopg.Error):
                frozen.close()


def test_a_stopped_backend_is_reported_once_and_ends_when_resumed(
    postgres_url: str, signer: LogSigner, caplog: pytest.LogCaptureFixture
) -> None:
    """The one case nothing covers: the leader's PostgreSQL backend itself stopped inside its
    transaction takes no signal. The candidates say so once; resumed, it ends at once, as they
    asked, and the next election takes over."""
    frozen = FrozenLeader(postgres_url)
    try:
        frozen.stop_inside_a_copy()
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            with short_lease_store(postgres_url, signer) as store:
                until(lambda: DID_NOT_END in caplog.text, f"logged: {DID_NOT_END}")
                time.sleep(3 * ELECTION_SECONDS)  # more tries, no more lines
                assert not store.leading and caplog.text.count(DID_NOT_END) == 1
                os.kill(frozen.pid, signal.SIGCONT)
                resumed = time.monotonic()
                took = takeover_seconds(store, resumed)
                assert took < ELECTION_SECONDS + SLACK, took
                until(lambda: session_ended(postgres_url, frozen.pid), "the frozen session is gone")
        finally:
            with contextlib.suppress(ProcessLookupError):  # ended
                os.kill(frozen.pid, signal.SIGCONT)
    finally:
        with contextlib.suppress(psycopg.Error):
            frozen.close()


def test_the_warnings_quoted_in_the_runbook_are_the_ones_logged() -> None:
    """docs/operations.md quotes these lines; the tests above see each of them logged."""
    runbook = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    for line in (ENDED, CANNOT_SEE, CANNOT_END, DID_NOT_END):
        assert line in runbook, line


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
