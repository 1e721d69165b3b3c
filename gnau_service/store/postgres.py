"""PostgreSQL (psycopg 3): the backend for several service processes sharing one log.

Writers serialise on the one-row ``log_head`` (``SELECT ... FOR UPDATE`` inside each batch's
transaction), which makes indices gap-free across processes without session-level advisory
locks (those break under transaction-pooling proxies).

A process may start while others write. Its schema check is a plain SELECT of the version in
``gnau_schema`` (ACCESS SHARE, which conflicts with no writer); only a migration runs DDL, and
that runs under a transaction-level advisory lock, after the writers' own first lock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from gnau_service.store.base import Backend, StoreError
from gnau_service.store.migrations import MIGRATIONS, Dialect, Migration, record_applied
from gnau_service.store.schema import SchemaState, first_line, migrations_to_run
from gnau_service.store.urls import redacted_url

# Schema changes from several processes at once would race on the catalog: a transaction-level
# advisory lock (released at commit, so safe behind a pooler) makes them take turns.
SCHEMA_LOCK: Final = 0x676E6175  # "gnau"
#: The NOTIFY channel on which each batch that grows the log announces the new size.
HEAD_CHANNEL: Final = "gnau_log_head"

SET_VERSION: Final = (
    "INSERT INTO gnau_schema (id, version) VALUES (1, %s)"
    " ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"
)


class PostgresBackend(Backend):
    """A PostgreSQL database at ``url``; reads use a small connection pool."""

    read_head_sql = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1 FOR UPDATE"

    def __init__(
        self, url: str, *, pool_size: int = 4, migrations: Sequence[Migration] = MIGRATIONS
    ) -> None:
        self.url = url
        #: The migrations this gnau knows (a test may pretend to be an older gnau).
        self.migrations = migrations
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=True,
            name="gnau-readers",
        )

    def __str__(self) -> str:
        return redacted_url(self.url)

    def connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, autocommit=True)
        except psycopg.Error as error:
            raise StoreError(f"{self}: cannot connect: {first_line(error)}") from error

    def reset(self, connection: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        # A pipeline cut short by an error skips the preparation of statements that psycopg
        # has already counted as prepared: only a new connection is sure to be in step.
        connection.close()
        return self.connect()

    @contextmanager
    def reader(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as connection:
            yield connection

    def schema_state(self, connection: psycopg.Connection[Any]) -> SchemaState:
        # Emptiness first: a migration that makes the tables records the version in the same
        # transaction, so once the tables are seen, so is the version (never "0, not empty").
        empty = not table_exists(connection, "log_head")
        return SchemaState(schema_version(connection), empty)

    def has_table(self, connection: psycopg.Connection[Any], table: str) -> bool:
        return table_exists(connection, table)

    def create_schema(
        self, connection: psycopg.Connection[Any], *, migrate: bool = False
    ) -> Sequence[Migration]:
        try:
            state = self.schema_state(connection)
            if not migrations_to_run(state, str(self), migrate=migrate, known=self.migrations):
                return ()
            return self._migrate(connection, migrate=migrate)
        except psycopg.Error as error:
            raise StoreError(f"{self}: cannot set up the schema: {first_line(error)}") from error

    def _migrate(
        self, connection: psycopg.Connection[Any], *, migrate: bool
    ) -> Sequence[Migration]:
        """Apply what is pending in one transaction, taking turns with other starting
        processes and holding off writers."""
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            # Another process may have migrated while this one waited for the lock.
            pending = migrations_to_run(
                self.schema_state(connection), str(self), migrate=migrate, known=self.migrations
            )
            if pending and table_exists(connection, "log_head"):
                # Writers lock the head row first, then the tables they write; the DDL locks
                # those tables (CREATE INDEX, CREATE TRIGGER). Taking the head row first too
                # makes writers wait for the DDL instead of deadlocking with it.
                connection.execute("SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE")
            for migration in pending:
                connection.execute(migration.script(Dialect.POSTGRESQL).encode())
                connection.execute(SET_VERSION, (migration.version,))
                record_applied(self, connection, migration)
        return pending

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def pipelined(self, connection: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
        return connection.pipeline()

    def close(self) -> None:
        self._pool.close()

    def announce_size(self, connection: psycopg.Connection[Any], size: int) -> None:
        # NOTIFY takes no parameters; the size is an integer the store computed.
        connection.execute(f"NOTIFY {HEAD_CHANNEL}, '{size:d}'".encode())

    async def watch_sizes(self) -> AsyncIterator[int]:
        # Its own connection: LISTEN is a session's, and a pooled one would be handed on.
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as connection:
            await connection.execute(f"LISTEN {HEAD_CHANNEL}".encode())
            async for notification in connection.notifies():
                if notification.payload.isdigit():
                    yield int(notification.payload)

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


def table_exists(connection: psycopg.Connection[Any], table: str) -> bool:
    """Whether ``table`` is on the search path; asking this way never fails, so never aborts
    the transaction it is asked in."""
    row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def schema_version(connection: psycopg.Connection[Any]) -> int:
    """The database's schema version: 0 for one made before versions were kept, or empty."""
    if not table_exists(connection, "gnau_schema"):
        return 0
    row = connection.execute("SELECT version FROM gnau_schema WHERE id = 1").fetchone()
    return int(row[0]) if row else 0
