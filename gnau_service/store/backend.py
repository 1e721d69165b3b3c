"""A SQL database as the store sees it: its connections, its dialect, and its errors.

Its connections are the drivers' own, as the store's shared code uses them
(:class:`~gnau_service.store.connections.Connection`). Each backend
(:mod:`~gnau_service.store.sqlite`, :mod:`~gnau_service.store.postgres`) also says how its steps'
events reach the log (:meth:`Backend.coordinate`): SQLite's step transactions integrate their own
events (:mod:`~gnau_service.store.in_step`); PostgreSQL's processes elect a sequencer
(:mod:`~gnau_service.store.step_writers`, :mod:`~gnau_service.store.sequencer`).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import ClassVar, Final

from gnau_service.store.connections import Connection, Row
from gnau_service.store.coordination import Coordination, WritingStore
from gnau_service.store.errors import StoreUnavailable
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.migrations import Migration

#: The log's current key: the one whose ``since_size`` is the largest (a rotation's new key
#: starts after the rotation entry). Read in its own statement after the head's lock is held: a
#: subquery in the locking statement would read the table as it was before the lock was granted.
CURRENT_KEY_SQL: Final = "SELECT vkey FROM log_keys ORDER BY since_size DESC, key_id LIMIT 1"

#: The events waiting for the sequencer, in id order (see :meth:`Backend.read_pending`).
PENDING_SQL: Final = (
    "SELECT id, kind, round_id, payload, time FROM log_pending"
    " WHERE idx IS NULL ORDER BY id LIMIT ?"
)


class Backend(ABC):
    """A SQL database: its connections, its dialect, its errors, and its coordination."""

    #: How a transaction starts; SQLite takes the write lock at once with IMMEDIATE.
    begin_sql: str = "BEGIN"
    #: What a SELECT appends to lock the rows it reads until the transaction ends (SQLite's
    #: transactions lock the whole database already).
    row_lock: str = ""
    #: What a SELECT appends to share-lock its rows until the transaction ends: rows it reads to
    #: act on, whose change must wait for it (or be read by it once made).
    share_lock: str = ""
    #: Reads the head row; PostgreSQL appends FOR UPDATE, so sequencers (in every process) take
    #: turns on it.
    read_head_sql: str = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1"
    #: The driver's base exception: what a failed schema change raises.
    driver_error: ClassVar[type[Exception]]
    #: The schema migrations this gnau knows, in order (each backend's constructor sets them).
    migrations: Sequence[Migration]
    #: The sequencer's lease, where several processes elect one (seconds; None: no election).
    lease_seconds: float | None = None
    #: Locks the lease's row, where there is one: what log-level work outside the sequencer (a
    #: key rotation) runs after the head's lock, so that a stopped one is ended like a stopped
    #: sequencer (see :mod:`~gnau_service.store.lease`).
    hold_lease_sql: str | None = None
    #: Whether a unit's writes are queued and sent together (:meth:`Transaction.write
    #: <gnau_service.store.transaction.Transaction.write>`): where each statement is a round
    #: trip to a server; in-process SQLite gains nothing by it.
    queues_writes: bool = False

    @abstractmethod
    def connect(self) -> Connection:
        """A new autocommit connection, for a writer (or a schema change)."""

    def connect_log_work(self) -> Connection:
        """A new autocommit connection for log-level work outside the sequencer (a key rotation);
        PostgreSQL bounds its waits by the lease, as the sequencer's work session's."""
        return self.connect()

    @abstractmethod
    def reader(self) -> AbstractContextManager[Connection]:
        """A connection for reads, borrowed for the ``with`` block."""

    @abstractmethod
    def coordinate(self, store: WritingStore) -> Coordination:
        """Start this backend's way of running ``store``'s steps and integrating their events."""

    # -- the schema (see gnau_service.store.schema) -----------------------------------------

    @abstractmethod
    def schema_version(self, connection: Connection) -> int:
        """The schema version the database records: 0 if it records none (plain reads)."""

    @abstractmethod
    def has_table(self, connection: Connection, table: str) -> bool:
        """Whether the database has ``table``; asking never fails a transaction."""

    @abstractmethod
    def schema_change(self, connection: Connection) -> AbstractContextManager[None]:
        """The transaction of a schema change: started processes take turns on it, and it holds
        off writers; committed at the end of the block, rolled back if it raises."""

    @abstractmethod
    def apply_migration(self, connection: Connection, migration: Migration) -> None:
        """Run ``migration``'s script in the open schema change, and record its version."""

    # -- statements -------------------------------------------------------------------------

    def sql(self, text: str) -> str:
        """``text`` with its ``?`` placeholders in the backend's style."""
        return text

    def run(self, connection: Connection, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement; a SELECT's rows are fetched."""
        cursor = connection.execute(self.sql(text), tuple(params))
        return list(cursor.fetchall()) if is_query(text) else []

    def sent_together(self, connection: Connection, count: int) -> AbstractContextManager[object]:
        """Where ``count`` statements run inside it are all sent before any is answered, and
        answered (the first failure raised) at its end: PostgreSQL's pipeline. Elsewhere each
        statement runs as it is called."""
        return contextlib.nullcontext()

    def run_queries(
        self, connection: Connection, queries: Sequence[tuple[str, Sequence[object]]]
    ) -> list[list[Row]]:
        """Run several SELECTs, then fetch the rows of each (one round trip on PostgreSQL)."""
        with self.sent_together(connection, len(queries)):
            cursors = [
                connection.execute(self.sql(text), tuple(params)) for text, params in queries
            ]
        return [list(cursor.fetchall()) for cursor in cursors]

    def run_writes(
        self,
        connection: Connection,
        writes: Sequence[tuple[str, Sequence[object]]],
        then: Sequence[str] = (),
    ) -> None:
        """Run statements whose rows nobody reads, in order, then the parameterless ``then``;
        the first that fails raises, and the rest do not run (one round trip on PostgreSQL)."""
        with self.sent_together(connection, len(writes) + len(then)):
            for text, params in writes:
                connection.execute(self.sql(text), tuple(params))
            for text in then:
                connection.execute(text, ())

    def run_together(self, connection: Connection, statements: Sequence[str]) -> list[Row]:
        """Run parameterless statements in order, and return the rows of the last SELECT among
        them; PostgreSQL sends them as one message (one round trip, not one each)."""
        rows: list[Row] = []
        for text in statements:
            result = self.run(connection, text)
            if is_query(text):
                rows = result
        return rows

    def read_pending(self, connection: Connection, limit: int) -> list[Row]:
        """The first ``limit`` events waiting for the sequencer, in id order."""
        return self.run(connection, PENDING_SQL, (limit,))

    @abstractmethod
    def insert_rows(
        self, connection: Connection, table: str, columns: Mapping[str, str], rows: Sequence[Row]
    ) -> None:
        """Insert ``rows`` into ``table``: the sequencer's bulk write. ``columns`` maps each
        column a row gives a value of, in order, to its PostgreSQL type."""

    @abstractmethod
    def index_pending(self, connection: Connection, indices: Mapping[int, int]) -> None:
        """Give integrated pending events (by id) their log index, and drop their payloads,
        which are in the entries now."""

    def announce_size(self, connection: Connection, notice: HeadNotice) -> None:  # noqa: B027
        """Tell other processes, when this transaction commits, that the log has grown (to
        ``notice.size``, integrating ``notice.indices``: PostgreSQL's NOTIFY). Processes of a
        database without it (most have none) learn by polling."""

    async def watch_sizes(self) -> AsyncIterator[int]:
        """The log's size each time another process grows it, for as long as the caller listens
        (PostgreSQL's LISTEN); a database that cannot say so yields nothing and returns."""
        return
        yield  # an async generator that yields nothing

    # -- errors -----------------------------------------------------------------------------

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means a unit lost a race with another writer (a unique key taken by
        a transaction that committed meanwhile, a deadlock), so running it again will see the
        winner's row; never so where writers take turns (SQLite)."""
        return False

    def is_unavailable(self, error: BaseException) -> bool:
        """Whether ``error`` means the database cannot be used right now (unreachable, read-only,
        full, busy), rather than that it refused this statement."""
        return False

    @contextlib.contextmanager
    def unavailable_as_store_error(self) -> Iterator[None]:
        """Let the database's "cannot be used right now" errors out as StoreUnavailable."""
        try:
            yield
        except Exception as error:
            if self.is_unavailable(error):
                raise StoreUnavailable(f"the database cannot be used: {error}") from error
            raise

    # -- erasure ----------------------------------------------------------------------------

    def scrub_deleted_rows(self, give_up_at: float | None = None) -> None:  # noqa: B027
        """After a transaction deleted rows to erase them (forgetting a player) and committed,
        drop the older copies of those rows that the database's own files still hold, where the
        service can do so safely; raises ScrubIncomplete if it cannot now (by ``give_up_at``, a
        ``time.monotonic()`` value, if given). Blocking: call it from a thread.

        Here nothing: PostgreSQL keeps the rows in dead tuples until ``VACUUM FULL`` rewrites the
        table, and in WAL segments until a checkpoint removes them. ``VACUUM FULL`` locks the
        table against every Deal for the whole rewrite of every seat ever dealt, and plain
        ``VACUUM`` does not overwrite the freed bytes; removing WAL needs a superuser and
        settings of the whole cluster. So they are the operator's, in a batch after erasures:
        docs/privacy.md, "On disk, after a forget", and docs/operations.md, "Erasure on disk"."""

    # -- connections ------------------------------------------------------------------------

    def rollback_quietly(self, connection: Connection) -> None:
        # The connection is replaced after a failed transaction, so a failed rollback changes
        # nothing.
        with contextlib.suppress(Exception):
            self.run(connection, "ROLLBACK")

    def close_quietly(self, connection: Connection) -> None:
        with contextlib.suppress(Exception):
            connection.close()

    def close(self) -> None:  # noqa: B027  (backends with pools override it)
        """Release the backend's connections."""


def is_query(text: str) -> bool:
    """Whether a statement returns rows: the store's statements that do all start with SELECT.

    >>> is_query("  select 1"), is_query("INSERT INTO t VALUES (1)")
    (True, False)
    """
    return text.lstrip()[:6].upper() == "SELECT"
