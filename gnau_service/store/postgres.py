"""PostgreSQL (psycopg 3): the backend for several service processes sharing one log.

Its coordination is an elected sequencer (:mod:`~gnau_service.store.step_writers`,
:mod:`~gnau_service.store.sequencer`). Round steps run on a few step writer threads, each with its
own connection, and lock only the rows they change. Sequencers serialise on the one-row ``log_head``
(``SELECT ... FOR UPDATE``), which makes indices gap-free across processes; one process at a time is
the sequencer, the holder of the lease in ``log_lease`` (:mod:`~gnau_service.store.lease`), on
connections of its own whose waits are bounded by the lease (so the sequencer's connections must
not go through a transaction-pooling proxy, which would drop their settings; steps and reads
may). Steps tell the
sequencer of new events with NOTIFY on :data:`PENDING_CHANNEL` (to which only the sequencer listens,
so a step wakes one process, not all), and the sequencer tells every process the log's new size on
:data:`HEAD_CHANNEL`.

A process may start while others write. Its schema check is a plain SELECT of the version in
``gnau_schema`` (ACCESS SHARE, which conflicts with no writer); only a migration runs DDL, and
that runs under a transaction-level advisory lock, after the writers' own first lock; as it holds
the log head, it waits for a lock, or for its client, no longer than the lease
(:data:`SCHEMA_CHANGE_SETTINGS`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from time import monotonic
from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection, Row
from gnau_service.store.coordination import Coordination, WritingStore
from gnau_service.store.errors import DatabaseUnreachable, StoreError
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.lease import (
    DEFAULT_LEASE_SECONDS,
    END_OVERDUE_SQL,
    END_WAIT_SECONDS,
    HOLD_SQL,
    PROGRESS_SQL,
    TAKE_SQL,
    Lease,
    LogProgress,
    keepalive_parameters,
    session_settings,
)
from gnau_service.store.migrations import MIGRATIONS, Dialect, Migration
from gnau_service.store.schema import first_line
from gnau_service.store.sequencer import LOG_WORK_APPLICATION_NAME, Notices
from gnau_service.store.step_writers import ElectedSequencer
from gnau_service.store.urls import redacted_url

# Schema changes from several processes at once would race on the catalog: a transaction-level
# advisory lock (released at commit, so safe behind a pooler) makes them take turns.
SCHEMA_LOCK: Final = 0x676E6175  # "gnau"
#: How long one attempt to connect may take (libpq's ``connect_timeout``, where the URL sets none).
CONNECT_TIMEOUT_SECONDS: Final = 5
#: The NOTIFY channel on which each batch that grows the log announces the new size.
HEAD_CHANNEL: Final = "gnau_log_head"
#: The NOTIFY channel on which a process that is not the sequencer says steps committed events.
PENDING_CHANNEL: Final = "gnau_log_pending"
# The outbox's first waiting rows are the start of the partial index log_pending_waiting.
# With statistics older than a backlog (analysed when few rows waited), the planner would
# rather scan the unique index on idx (idx IS NULL) as a bitmap and sort every waiting row:
# each batch then costs in proportion to the backlog, and catching up after an outage is
# quadratic. None of the sequencer's other statements wants a bitmap scan.
PENDING_PLAN_SQL: Final = "SET LOCAL enable_bitmapscan = off"

#: The settings of a schema change's transaction, once it holds the advisory lock: it holds the
#: log head while it runs, so it waits for a lock (a backup's, a step's) or for its client (a
#: stopped ``gnau db migrate``) no longer than the lease. No statement timeout: a migration's DDL
#: may take long, and runs whether or not its client is stopped.
SCHEMA_CHANGE_SETTINGS: Final = ("lock_timeout", "idle_in_transaction_session_timeout")

log = logging.getLogger(__name__)

SET_VERSION: Final = (
    "INSERT INTO gnau_schema (id, version) VALUES (1, %s)"
    " ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"
)


def connection_parameters(url: str, lease_seconds: float) -> dict[str, str]:
    """What every connection to the database adds to ``url``, readers and the pool included:
    TCP keepalives and a user timeout of about the lease, so a read blocked on a vanished network
    fails in seconds, not the kernel's minutes (it would hold its thread, and a stopping
    process); and a connect timeout, unless the URL sets its own."""
    parameters = dict(keepalive_parameters(lease_seconds))
    if "connect_timeout" not in conninfo_to_dict(url):
        parameters["connect_timeout"] = str(CONNECT_TIMEOUT_SECONDS)
    return parameters


class PostgresBackend(Backend):
    """A PostgreSQL database at ``url``; reads use a small connection pool."""

    read_head_sql = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1 FOR UPDATE"
    hold_lease_sql = HOLD_SQL
    row_lock = " FOR UPDATE"
    share_lock = " FOR SHARE"
    queues_writes = True
    driver_error = psycopg.Error
    lease_seconds: float
    # The notice after a step's COMMIT, in a transaction of its own (see step_writers.py).
    steps_notice_sql = f"NOTIFY {PENDING_CHANNEL}"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        migrations: Sequence[Migration] = MIGRATIONS,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.url = url
        self.lease_seconds = lease_seconds
        #: The migrations this gnau knows (a test may pretend to be an older gnau).
        self.migrations = migrations
        self._parameters = connection_parameters(url, lease_seconds)
        #: The last warning about a session holding an expired lease, not repeated every try.
        self._overdue_warning = ""
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, **self._parameters},
            open=True,
            name="gnau-readers",
        )

    def __str__(self) -> str:
        return redacted_url(self.url)

    def connect(self) -> psycopg.Connection[TupleRow]:
        return self._open(self.url)

    def coordinate(self, store: WritingStore) -> Coordination:
        return ElectedSequencer(self, self, store)

    # -- the election (gnau_service.store.sequencer.Election) ---------------------------------

    def connect_sequencer(
        self, application_name: str, *, work: bool
    ) -> psycopg.Connection[TupleRow]:
        settings = session_settings(self.lease_seconds) if work else {}
        return self._connect_bounded(application_name, settings)

    def connect_log_work(self) -> psycopg.Connection[TupleRow]:
        # A key rotation holds the head and the lease's row like an integration: the same
        # bounded session, named so that pg_stat_activity tells it from the sequencer's.
        return self.connect_sequencer(f"{LOG_WORK_APPLICATION_NAME}-{os.getpid()}", work=True)

    def connect_step_writer(self) -> psycopg.Connection[TupleRow]:
        # A frozen process's step holds its round's row: ended after the lease, so that the
        # round's next step on another replica waits no longer than that.
        idle = session_settings(self.lease_seconds)["idle_in_transaction_session_timeout"]
        return self._connect_bounded(None, {"idle_in_transaction_session_timeout": idle})

    def _connect_bounded(
        self, application_name: str | None, settings: Mapping[str, str]
    ) -> psycopg.Connection[TupleRow]:
        connection = self._open(make_conninfo(self.url, application_name=application_name))
        try:
            for name, value in settings.items():
                connection.execute("SELECT set_config(%s, %s, false)", (name, value))
        except psycopg.Error as error:
            connection.close()
            raise StoreError(f"{self}: cannot connect: {first_line(error)}") from error
        return connection

    def _open(self, conninfo: str) -> psycopg.Connection[TupleRow]:
        try:
            return psycopg.connect(make_conninfo(conninfo, **self._parameters), autocommit=True)
        except psycopg.OperationalError as error:
            raise DatabaseUnreachable(f"{self}: cannot connect: {first_line(error)}") from error
        except psycopg.Error as error:
            raise StoreError(f"{self}: cannot connect: {first_line(error)}") from error

    def take_lease(self, work: psycopg.Connection[TupleRow], holder: str) -> Lease | None:
        row = work.execute(TAKE_SQL, (holder, self.lease_seconds)).fetchone()
        if row is None and self._end_overdue_holder(work):
            row = work.execute(TAKE_SQL, (holder, self.lease_seconds)).fetchone()
        if row is not None:
            self._overdue_warning = ""
        return None if row is None else Lease(int(row[0]), self.lease_seconds)

    def _end_overdue_holder(self, work: psycopg.Connection[TupleRow]) -> bool:
        """End the session whose transaction has held the expired lease's row past the lease
        (step 4 of lease.py's protocol); whether one was ended."""
        wait = int(END_WAIT_SECONDS * 1000)
        try:
            row = work.execute(END_OVERDUE_SQL, (self.lease_seconds, wait)).fetchone()
        except psycopg.errors.InsufficientPrivilege as error:
            self._warn_overdue(
                "cannot end the session that holds the log's expired lease, so the log stalls"
                f" until it ends: {first_line(error)} (every replica must connect as one role, or"
                " have pg_signal_backend and pg_read_all_stats: docs/operations.md)"
            )
            return False
        if row is None:
            return False
        pid, visible, ended = row
        if ended:
            log.warning(
                "ended session %d, whose transaction held the log's lease past its expiry (a"
                " sequencer or key rotation stopped inside it); taking the lease",
                pid,
            )
            return True
        if not visible:
            self._warn_overdue(
                f"session {pid} holds the log's expired lease, but this role cannot see when its"
                " transaction began, so cannot end it (grant pg_read_all_stats, or connect every"
                " replica as one role: docs/operations.md)"
            )
        elif ended is not None:
            self._warn_overdue(
                f"session {pid} holds the log's expired lease and did not end when asked: its"
                " PostgreSQL backend may be stopped (docs/operations.md, 'A stalled log')"
            )
        return False

    def _warn_overdue(self, warning: str) -> None:
        if warning != self._overdue_warning:
            log.warning("%s", warning)
            self._overdue_warning = warning

    def progress(self, connection: psycopg.Connection[TupleRow]) -> LogProgress:
        row = connection.execute(PROGRESS_SQL).fetchone()
        if row is None:  # the lease's row is made by its migration, and never deleted
            raise StoreError(f"{self}: the table log_lease has no row")
        epoch, holder, age, expired, oldest = row
        return LogProgress(
            int(epoch), str(holder), float(age), bool(expired), float(oldest or 0.0), monotonic()
        )

    def listen(self, session: psycopg.Connection[TupleRow]) -> None:
        session.execute(f"LISTEN {HEAD_CHANNEL}".encode())

    def listen_for_steps(self, session: psycopg.Connection[TupleRow]) -> None:
        session.execute(f"LISTEN {PENDING_CHANNEL}".encode())

    def notifications(self, session: psycopg.Connection[TupleRow]) -> Notices:
        heads: list[HeadNotice] = []
        steps = False
        for notification in session.notifies(timeout=0):
            if notification.channel == PENDING_CHANNEL:
                steps = True
            elif (notice := HeadNotice.decode(notification.payload)) is not None:
                heads.append(notice)
        return Notices(heads, steps)

    # -- statements -------------------------------------------------------------------------

    def sent_together(self, connection: Connection, count: int) -> AbstractContextManager[object]:
        # In pipeline mode every statement is sent before any result is awaited, and the
        # pipeline's one sync raises the first failure (the ones after it are not run).
        if count < 2:
            return contextlib.nullcontext()
        return psycopg_connection(connection).pipeline()

    def run_together(self, connection: Connection, statements: Sequence[str]) -> list[Row]:
        # One simple-protocol Query message: its statements run in order, each with its own
        # snapshot, inside the transaction the message begins or continues (or each in its own
        # after a COMMIT), and the first that fails stops the rest. Never prepared: a prepared
        # statement is one statement.
        cursor = psycopg_connection(connection).execute(
            "; ".join(statements).encode(), prepare=False
        )
        rows: list[Row] = []
        while True:
            if cursor.description is not None:
                rows = cursor.fetchall()
            if not cursor.nextset():
                return rows

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(
            error,
            psycopg.errors.UniqueViolation
            | psycopg.errors.SerializationFailure
            | psycopg.errors.DeadlockDetected,
        )

    @contextmanager
    def reader(self) -> Iterator[psycopg.Connection[TupleRow]]:
        with self._pool.connection() as connection:
            yield connection

    def schema_version(self, connection: Connection) -> int:
        return schema_version(connection)

    def has_table(self, connection: Connection, table: str) -> bool:
        return table_exists(connection, table)

    @contextmanager
    def schema_change(self, connection: Connection) -> Iterator[None]:
        with psycopg_connection(connection).transaction():
            # Starting processes take turns on a transaction-level advisory lock.
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            settings = session_settings(self.lease_seconds)
            for name in SCHEMA_CHANGE_SETTINGS:
                connection.execute("SELECT set_config(%s, %s, true)", (name, settings[name]))
            if table_exists(connection, "log_head"):
                # Sequencers lock the head row first, then the tables they write; the DDL locks
                # those tables (CREATE INDEX, CREATE TRIGGER). Taking the head row first too
                # makes sequencers wait for the DDL instead of deadlocking with it.
                connection.execute("SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE")
            yield

    def apply_migration(self, connection: Connection, migration: Migration) -> None:
        psycopg_connection(connection).execute(migration.script(Dialect.POSTGRESQL).encode())
        connection.execute(SET_VERSION, (migration.version,))

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def close(self) -> None:
        self._pool.close()

    def insert_rows(
        self, connection: Connection, table: str, columns: Mapping[str, str], rows: Sequence[Row]
    ) -> None:
        # A binary COPY: one statement whose text never changes (a multi-row INSERT's changed
        # with the row count, and psycopg parsed each anew), and bytes sent as they are (text
        # COPY writes bytea in hex, which both sides spend CPU on).
        statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
        with (
            psycopg_connection(connection).cursor() as cursor,
            cursor.copy(statement.encode()) as copy,
        ):
            copy.set_types(list(columns.values()))
            for row in rows:
                copy.write_row(row)

    def read_pending(self, connection: Connection, limit: int) -> list[Row]:
        self.run(connection, PENDING_PLAN_SQL)
        return super().read_pending(connection, limit)

    def index_pending(self, connection: Connection, indices: Mapping[int, int]) -> None:
        # One statement of two arrays, whatever the batch's size.
        connection.execute(
            "UPDATE log_pending SET idx = pending.idx, payload = NULL"
            " FROM unnest(%s::bigint[], %s::bigint[]) AS pending (id, idx)"
            " WHERE log_pending.id = pending.id",
            (list(indices.keys()), list(indices.values())),
        )

    def announce_size(self, connection: Connection, notice: HeadNotice) -> None:
        # NOTIFY takes no parameters; the payload is integers the store computed, and spaces.
        psycopg_connection(connection).execute(
            f"NOTIFY {HEAD_CHANNEL}, '{notice.encode()}'".encode()
        )

    async def watch_sizes(self) -> AsyncIterator[int]:
        # Its own connection: LISTEN is a session's, and a pooled one would be handed on.
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as connection:
            await connection.execute(f"LISTEN {HEAD_CHANNEL}".encode())
            async for notification in connection.notifies():
                if (notice := HeadNotice.decode(notification.payload)) is not None:
                    yield notice.size

    def is_unavailable(self, error: BaseException) -> bool:
        # OperationalError: lost connections, class 53 (disk full, too many connections), 57
        # (shutdown), 40 (serialisation, deadlock: try again); a standby refuses writes.
        return isinstance(
            error,
            psycopg.OperationalError
            | psycopg.InterfaceError
            | psycopg.errors.ReadOnlySqlTransaction
            | PoolTimeout,
        )


def psycopg_connection(connection: Connection) -> psycopg.Connection[TupleRow]:
    """``connection`` as psycopg's own class, for what only it has (COPY, a transaction block,
    a query given as bytes): a backend is handed only the connections it opened itself."""
    assert isinstance(connection, psycopg.Connection)
    return connection


def table_exists(connection: Connection, table: str) -> bool:
    """Whether ``table`` is on the search path; asking this way never fails, so never aborts
    the transaction it is asked in."""
    row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def schema_version(connection: Connection) -> int:
    """The database's schema version: 0 for one made before versions were kept, or empty."""
    if not table_exists(connection, "gnau_schema"):
        return 0
    row = connection.execute("SELECT version FROM gnau_schema WHERE id = 1").fetchone()
    return int(row[0]) if row else 0
