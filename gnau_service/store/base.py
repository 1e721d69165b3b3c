"""One storage interface over SQL: round steps that commit events to an outbox, a sequencer that
puts them in the log, and reads.

Every write is a *unit of work* (a round step): a function that receives a :class:`Transaction`,
reads and writes the store's tables through it, and appends events. A step writer runs queued
units in one database transaction (group commit), each unit in its own savepoint so that a unit
that raises changes nothing and spares its neighbours. An appended event is a row of the outbox
(``log_pending``), not yet a log entry: a step touches only its round's rows, its table's
open-round guard, the idempotency record and the outbox, never the log head, so steps of
different rounds (in different processes on one PostgreSQL) do not wait for each other. On
PostgreSQL a unit that lost a race with another process (a unique key taken meanwhile, a
deadlock) is run again in a fresh savepoint, where it sees the winner's committed row.

The sequencer (:mod:`gnau_service.store.sequencer`) then integrates committed events into the
log under the head's lock: indices, chain, signatures, tree, head, a signed checkpoint. A unit's
caller is answered only after that, so an acknowledged entry is durable and covered by a signed
checkpoint; :class:`PendingEntry` objects the unit returned then carry their indices. On SQLite
(one writer at a time) the step writer integrates at the end of each step transaction, before
the one COMMIT; on PostgreSQL one process per log is the sequencer, and callers learn of its
transactions as :mod:`gnau_service.store.waiting` describes.

Each step transaction reads the log's current key (the ``log_keys`` row with the largest
``since_size``): a store whose key is no longer current asks its ``key_source`` for the current
one (a running server rereads its key file) and, if that has no key for it either, refuses the
batch with :class:`KeyNotCurrent` (a :class:`StoreUnavailable`: nothing is written and a retry may
succeed once the key file holds the current key). The sequencer checks the same under the head
lock before it signs, so no entry is ever signed by a retired key.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from gnau_service.audit.entries import EntryKind, JsonValue, event_payload
from gnau_service.audit.log import AppendedEntry, LogAppender, LogHead
from gnau_service.audit.merkle import Frontier, consistency_proof, inclusion_proof
from gnau_service.audit.signing import KeyRotation, LogSigner
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.store.batches import BatchObserver, CommittedBatch
from gnau_service.store.errors import KeyNotCurrent, StoreError, StoreUnavailable
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.sequencer import (
    CURRENT_KEY_SQL,
    SEQUENCE_BATCH,
    Integrated,
    Sequencer,
    integrate,
    sequence,
)
from gnau_service.store.waiting import Outcome, PendingEntry, Waiters, Waiting, deliver

if TYPE_CHECKING:
    from gnau_service.store.migrations import Migration
    from gnau_service.store.schema import SchemaState

T = TypeVar("T")
Row = tuple[Any, ...]

MAX_BATCH: Final = 512
MAX_READ_ENTRIES: Final = 10_000
#: Times a unit that lost a race with another writer (see Backend.is_conflict) is run again.
CONFLICT_RETRIES: Final = 3

log = logging.getLogger(__name__)

__all__ = [
    "CURRENT_KEY_SQL",
    "Backend",
    "KeyNotCurrent",
    "LogReader",
    "PendingEntry",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Transaction",
]

#: Looks for the signer of the log's current key, given that key's verifier key string; None if
#: it has none (for a server: its key file, reread).
KeySource = Callable[[str], LogSigner | None]


def utc_now() -> str:
    """The current time in the audit log's timestamp form."""
    return format_utc_timestamp(datetime.now(UTC))


class Backend(ABC):
    """A SQL database: its connections, its dialect, and its schema."""

    #: How a transaction starts; SQLite takes the write lock at once with IMMEDIATE.
    begin_sql: str = "BEGIN"
    #: Whether step transactions integrate their own events before committing (SQLite: one
    #: writer at a time anyway), rather than a sequencer elected among processes (PostgreSQL).
    sequences_in_steps: bool = True
    #: Step writer threads, each with its own connection (SQLite has one writer at a time).
    step_writers: int = 1
    #: What a SELECT appends to lock the rows it reads until the transaction ends (SQLite's
    #: transactions lock the whole database already).
    row_lock: str = ""
    #: Reads the head row; PostgreSQL appends FOR UPDATE, so sequencers (in every process) take
    #: turns on it.
    read_head_sql: str = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1"
    #: Run by the sequencer's transaction before it reads the outbox, if any (PostgreSQL: a
    #: planner setting, see there).
    sequencer_plan_sql: str | None = None
    #: The schema migrations this gnau knows, in order (each backend's constructor sets them).
    migrations: Sequence[Migration]

    @abstractmethod
    def connect(self, *, application_name: str | None = None) -> Any:
        """A new autocommit connection, for a writer thread (or a schema change); named, where
        the database shows names (PostgreSQL's pg_stat_activity)."""

    @abstractmethod
    def reader(self) -> AbstractContextManager[Any]:
        """A connection for reads, borrowed for the ``with`` block."""

    @abstractmethod
    def schema_state(self, connection: Any) -> SchemaState:
        """The schema version the database records, and whether it is empty (plain reads)."""

    @abstractmethod
    def create_schema(self, connection: Any, *, migrate: bool = False) -> Sequence[Migration]:
        """Bring the schema up to date as :func:`~gnau_service.store.schema.migrations_to_run`
        says (an empty database gets it all; an older one only if ``migrate``), or raise its
        refusal; the migrations applied."""

    @abstractmethod
    def has_table(self, connection: Any, table: str) -> bool:
        """Whether the database has ``table``; asking never fails a transaction."""

    def sql(self, text: str) -> str:
        """``text`` with its ``?`` placeholders in the backend's style."""
        return text

    def announce_size(self, connection: Any, notice: HeadNotice) -> None:  # noqa: B027
        """Tell other processes, when this transaction commits, that the log has grown (to
        ``notice.size``, integrating ``notice.indices``: PostgreSQL's NOTIFY). Processes of a
        database without it (most have none) learn by polling."""

    async def watch_sizes(self) -> AsyncIterator[int]:
        """The log's size each time another process grows it, for as long as the caller listens
        (PostgreSQL's LISTEN); a database that cannot say so yields nothing and returns."""
        return
        yield  # an async generator that yields nothing

    def begin_at_once(self, connection: Any) -> bool:
        """Begin a step transaction if that needs no waiting (the write lock is free now);
        whether it began. A database whose BEGIN may always wait (across a network) never does."""
        return False

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means a unit lost a race with another writer (a unique key taken by
        a transaction that committed meanwhile, a deadlock), so running it again will see the
        winner's row; never so where writers take turns (SQLite)."""
        return False

    # The election and the notices of a sequencer elected among processes (PostgreSQL only).

    def try_lead(self, session: Any) -> bool:
        """Try to become the log's sequencer on ``session`` (held until the session ends)."""
        raise NotImplementedError

    def listen(self, session: Any) -> None:
        """Hear, on ``session``, the log growing."""
        raise NotImplementedError

    def listen_for_steps(self, session: Any) -> None:
        """Hear, on ``session`` too, steps committing events (the sequencer alone does)."""
        raise NotImplementedError

    def notifications(self, session: Any) -> tuple[list[HeadNotice], bool]:
        """The notices ``session`` has received: (how the log grew, steps committed events)."""
        raise NotImplementedError

    def commit_statements(self, *, announce_pending: bool) -> list[str]:
        """What commits a step transaction and, if ``announce_pending`` (a process that is not
        the sequencer), then tells the sequencer, wherever it runs, that steps committed events
        (a database without notices has nothing to add: its sequencer is in the process)."""
        return ["COMMIT"]

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

    def run(self, connection: Any, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement; a SELECT's rows are fetched."""
        cursor = connection.execute(self.sql(text), tuple(params))
        return list(cursor.fetchall()) if is_query(text) else []

    def run_queries(
        self, connection: Any, queries: Sequence[tuple[str, Sequence[object]]]
    ) -> list[list[Row]]:
        """Run several SELECTs, then fetch the rows of each."""
        cursors = [connection.execute(self.sql(text), tuple(params)) for text, params in queries]
        return [list(cursor.fetchall()) for cursor in cursors]

    def run_together(self, connection: Any, statements: Sequence[str]) -> list[Row]:
        """Run parameterless statements in order, and return the rows of the last SELECT among
        them; PostgreSQL sends them as one message (one round trip, not one each)."""
        rows: list[Row] = []
        for text in statements:
            result = self.run(connection, text)
            if is_query(text):
                rows = result
        return rows

    def insert_rows(
        self, connection: Any, table: str, columns: Mapping[str, str], rows: Sequence[Row]
    ) -> None:
        """Insert ``rows`` into ``table``: the sequencer's bulk write. ``columns`` maps each
        column a row gives a value of, in order, to its PostgreSQL type. Here (SQLite,
        in-process) one prepared statement, run for every row; PostgreSQL streams them in one
        binary COPY."""
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        connection.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)  # noqa: S608  (the store's own names)

    def index_pending(self, connection: Any, indices: Mapping[int, int]) -> None:
        """Give integrated pending events (by id) their log index, and drop their payloads,
        which are in the entries now."""
        connection.executemany(
            "UPDATE log_pending SET idx = ?, payload = NULL WHERE id = ?",
            [(index, pending_id) for pending_id, index in indices.items()],
        )

    def rollback_quietly(self, connection: Any) -> None:
        # The connection is replaced after a failed transaction, so a failed rollback changes
        # nothing.
        with contextlib.suppress(Exception):
            self.run(connection, "ROLLBACK")

    def close_quietly(self, connection: Any) -> None:
        with contextlib.suppress(Exception):
            connection.close()

    def close(self) -> None:  # noqa: B027  (backends with pools override it)
        """Release the backend's connections."""


def is_query(text: str) -> bool:
    """Whether a statement returns rows: the store's statements that do all start with SELECT."""
    return text.lstrip()[:6].upper() == "SELECT"


def pending_indices_sql(count: int) -> str:
    """The query of ``(id, idx)`` for ``count`` pending ids (idx NULL until integrated)."""
    marks = ", ".join("?" for _ in range(count))
    return f"SELECT id, idx FROM log_pending WHERE id IN ({marks})"  # noqa: S608  (only ?s)


class Transaction:
    """What a unit of work may do: SQL on the store's tables, and appending events."""

    def __init__(
        self, backend: Backend, connection: Any, time: str, recent: dict[int, int] | None = None
    ):
        self._backend = backend
        self._connection = connection
        self.time = time
        self._recent = {} if recent is None else recent
        #: The events this unit appended, in order.
        self.appended: list[PendingEntry] = []
        #: Earlier events whose indices the unit's answer needs, not integrated yet.
        self.awaited: list[PendingEntry] = []

    @property
    def row_lock(self) -> str:
        """What a SELECT appends to lock its rows until the step commits ("" where writers take
        turns anyway): a step that reads a row to change it locks it, so that two processes
        cannot both change it from the same state."""
        return self._backend.row_lock

    def execute(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement (``?`` placeholders) and return its rows, if any."""
        with self._backend.unavailable_as_store_error():
            return self._backend.run(self._connection, text, params)

    def query_all(self, *queries: tuple[str, Sequence[object]]) -> list[list[Row]]:
        """Run several SELECTs and return the rows of each."""
        with self._backend.unavailable_as_store_error():
            return self._backend.run_queries(self._connection, queries)

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
    ) -> PendingEntry:
        """Append an event: it is committed with the step, and the caller is answered once the
        sequencer has made it a signed entry (then the returned entry has its index). Raises
        :class:`~gnau_service.audit.entries.EntryError` for an event no entry may hold."""
        # Checked and made canonical here, so that such an event fails its step (and only its
        # step) rather than the sequencer, which signs these bytes as they are.
        payload_json = event_payload(kind, payload, time=self.time, round_id=round_id)
        with self._backend.unavailable_as_store_error():
            row = self._connection.execute(
                self._backend.sql(
                    "INSERT INTO log_pending (kind, round_id, payload, time)"
                    " VALUES (?, ?, ?, ?) RETURNING id"
                ),
                (str(kind), round_id, payload_json.decode("utf-8"), self.time),
            ).fetchone()
        entry = PendingEntry(int(row[0]), kind, round_id)
        self.appended.append(entry)
        return entry

    def refer(self, pending_ids: Sequence[int]) -> list[PendingEntry]:
        """Earlier events, by pending id, whose indices the unit's answer needs: those already
        integrated come with their index; for the others, the caller is answered once they are
        (a retry that arrives after its step committed but before integration waits so)."""
        if not pending_ids:
            return []
        # This process usually knows them: it integrated them, or answered their callers.
        known: dict[int, Any] = {i: self._recent[i] for i in pending_ids if i in self._recent}
        unknown = [pending_id for pending_id in pending_ids if pending_id not in known]
        if unknown:
            rows = self.execute(pending_indices_sql(len(unknown)), tuple(unknown))
            known.update((int(row[0]), row[1]) for row in rows)
        entries = []
        for pending_id in pending_ids:
            index = known.get(pending_id)
            entry = PendingEntry(pending_id, index=-1 if index is None else int(index))
            if entry.index < 0:
                self.awaited.append(entry)
            entries.append(entry)
        return entries


Work = Callable[[Transaction], T]
#: Told of each durable batch that grows the log: its first entry's index, and every entry.
CommitListener = Callable[[int, list[bytes]], None]


@dataclass
class _Queued(Generic[T]):
    """A unit and who waits for it: a thread (a concurrent future) or an event loop."""

    work: Work[T]
    future: Future[T] | asyncio.Future[T] = field(default_factory=Future)
    loop: asyncio.AbstractEventLoop | None = None


_STOP: Final = object()


class LogReader:
    """Reads of the log in a store: entries, checkpoints, keys and proofs. Needs no key."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def query(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run a read-only statement (``?`` placeholders) on a reader connection."""
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return self.backend.run(connection, text, params)

    def head(self) -> LogHead:
        """The committed head of the log."""
        return LogHead.decode(*self.query("SELECT size, prev_hash, frontier FROM log_head")[0])

    def size(self) -> int:
        return int(self.query("SELECT size FROM log_head")[0][0])

    def entries(self, start: int, end: int) -> list[bytes]:
        """The stored bytes of entries ``start <= index < end`` (at most MAX_READ_ENTRIES)."""
        end = min(end, start + MAX_READ_ENTRIES)
        rows = self.query(
            "SELECT data FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end)
        )
        return [bytes(row[0]) for row in rows]

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Every entry from ``start`` to ``end`` (default: the current size), page by page."""
        end = self.size() if end is None else end
        while start < end:
            page = self.entries(start, min(end, start + MAX_READ_ENTRIES))
            if not page:
                return
            yield from page
            start += len(page)

    def round_entries(self, round_id: str) -> list[bytes]:
        """Every entry of one round, in log order."""
        rows = self.query(
            "SELECT data FROM log_entries WHERE round_id = ? ORDER BY idx", (round_id,)
        )
        return [bytes(row[0]) for row in rows]

    def checkpoint(self, size: int | None = None) -> str | None:
        """The signed checkpoint text at ``size``, or the latest one; None if there is none."""
        if size is None:
            rows = self.query("SELECT note FROM log_checkpoints ORDER BY size DESC LIMIT 1")
        else:
            rows = self.query("SELECT note FROM log_checkpoints WHERE size = ?", (size,))
        return str(rows[0][0]) if rows else None

    def checkpoints(self) -> list[str]:
        return [str(row[0]) for row in self.query("SELECT note FROM log_checkpoints ORDER BY size")]

    def current_key(self) -> str | None:
        """The verifier key of the key that signs the log's next entries (None: no key yet)."""
        rows = self.query(CURRENT_KEY_SQL)
        return str(rows[0][0]) if rows else None

    def public_keys(self) -> list[str]:
        """Every key that has signed for this log, as C2SP verifier keys, oldest first."""
        rows = self.query("SELECT vkey FROM log_keys ORDER BY since_size, key_id")
        return [str(row[0]) for row in rows]

    def frontier(self, size: int) -> Frontier:
        """The Merkle frontier of the first ``size`` entries (O(log n) reads)."""
        self._check_size(size)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return Frontier.from_reader(_NodeReader(self.backend, connection), size)

    def entries_of_kind(self, kind: EntryKind) -> list[bytes]:
        """Every entry of one kind, in log order (for the rare kinds: key rotations, starts)."""
        rows = self.query("SELECT data FROM log_entries WHERE kind = ? ORDER BY idx", (str(kind),))
        return [bytes(row[0]) for row in rows]

    def recent_rounds(self, limit: int) -> list[str]:
        """The ids of the ``limit`` rounds with the latest entries, latest first."""
        rows = self.query(
            "SELECT round_id FROM log_entries WHERE round_id IS NOT NULL"
            " GROUP BY round_id ORDER BY MAX(idx) DESC LIMIT ?",
            (limit,),
        )
        return [str(row[0]) for row in rows]

    def round_span(self, round_id: str) -> tuple[int, int] | None:
        """The indices of a round's first and last entries, or None if it has none."""
        rows = self.query(
            "SELECT MIN(idx), MAX(idx) FROM log_entries WHERE round_id = ?", (round_id,)
        )
        if not rows or rows[0][0] is None:
            return None
        return int(rows[0][0]), int(rows[0][1])

    def checkpoint_size_from(self, size: int) -> int | None:
        """The smallest checkpointed size of at least ``size``."""
        rows = self.query("SELECT MIN(size) FROM log_checkpoints WHERE size >= ?", (size,))
        return None if rows[0][0] is None else int(rows[0][0])

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """The RFC 6962 inclusion proof of entry ``index`` in the tree of ``size`` entries."""
        self._check_size(size)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return inclusion_proof(_NodeReader(self.backend, connection), index, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """The RFC 6962 consistency proof from the tree of ``size1`` to that of ``size2``."""
        self._check_size(size2)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return consistency_proof(_NodeReader(self.backend, connection), size1, size2)

    def pending_indices(self, pending_ids: Sequence[int]) -> dict[int, int]:
        """The log index of each of these pending events that has been integrated."""
        found: dict[int, int] = {}
        for start in range(0, len(pending_ids), 500):
            chunk = tuple(pending_ids[start : start + 500])
            rows = self.query(pending_indices_sql(len(chunk)), chunk)
            found.update((int(row[0]), int(row[1])) for row in rows if row[1] is not None)
        return found

    def _check_size(self, size: int) -> None:
        current = self.size()
        if size > current:
            raise ValueError(f"the log has {current} entries, fewer than the {size} asked for")


class Store(LogReader):
    """The log and the service's tables in one SQL database: step writers and a sequencer."""

    def __init__(
        self,
        backend: Backend,
        signer: LogSigner,
        *,
        clock: Callable[[], str] = utc_now,
        max_batch: int = MAX_BATCH,
        migrate: bool = False,
        key_source: KeySource | None = None,
    ) -> None:
        super().__init__(backend)
        self.signer = signer
        self._key_source = key_source
        self._clock = clock
        self._max_batch = max_batch
        self._queue: queue.Queue[_Queued[Any] | object] = queue.Queue()
        self._closed = False
        self._listeners: list[CommitListener] = []
        self._observers: list[BatchObserver] = []
        self._waiters = Waiters()
        self._loop_steps: _LoopSteps | None = None
        #: Test-only: called on a step writer's thread inside every step transaction, after its
        #: units ran and before its COMMIT (a test stalls a step there, holding its row locks).
        #: Never set in production.
        self.step_hook: Callable[[], None] | None = None
        # The backends raise a StoreError naming their database if they cannot connect or set
        # up the schema; the rest of start-up is wrapped the same way.
        try:
            connection = backend.connect()
            try:
                #: The migrations this start applied (only a new database's, unless ``migrate``).
                self.migrated = backend.create_schema(connection, migrate=migrate)
                # The first key of a new log; later keys come only by rotation (a store with any
                # other key signs nothing: see KeyNotCurrent).
                backend.run(
                    connection,
                    "INSERT INTO log_keys (key_id, vkey, since_size)"
                    " SELECT ?, ?, size FROM log_head"
                    " WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM log_keys) ON CONFLICT DO NOTHING",
                    (signer.key_id.hex(), signer.vkey),
                )
            finally:
                backend.close_quietly(connection)
        except StoreError:
            backend.close()
            raise
        except Exception as error:
            backend.close()
            message = str(error).strip().partition("\n")[0]
            raise StoreError(f"{backend}: cannot register the log key: {message}") from error
        self._writers = [
            threading.Thread(target=self._write_loop, name=f"gnau-store-step-{n}", daemon=True)
            for n in range(backend.step_writers)
        ]
        for writer in self._writers:
            writer.start()
        self._sequencer = None if backend.sequences_in_steps else Sequencer(self)

    # -- writing ----------------------------------------------------------------------------

    def submit(self, work: Work[T]) -> Future[T]:
        """Queue a unit of work; the future resolves once its events are integrated. A unit
        whose future is cancelled before its batch starts is not run."""
        future: Future[T] = Future()
        self._enqueue(_Queued(work, future))
        return future

    def run(self, work: Work[T]) -> T:
        """Run a unit of work and wait until its events are integrated."""
        return self.submit(work).result()

    async def run_async(self, work: Work[T]) -> T:
        """Run a unit of work from an event loop and await its integration.

        On an in-process database (SQLite) the loop runs the batch's units itself and hands only
        what may block (COMMIT and its fsync; the write lock, if another connection holds it) to
        a thread. Otherwise a
        step writer thread runs the unit, and each loop is woken once per batch of answers."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._enqueue(_Queued(work, future, loop))
        return await future

    def _enqueue(self, queued: _Queued[Any]) -> None:
        """Hand a unit to its writer: its event loop's, for a loop over an in-process database
        (SQLite); else the step writer threads."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = queued.loop
        if loop is None or not self.backend.sequences_in_steps:
            self._queue.put(queued)
            return
        if self._loop_steps is None or self._loop_steps.loop is not loop:
            if self._loop_steps is not None:
                self._loop_steps.close()
            self._loop_steps = _LoopSteps(self, loop)
        self._loop_steps.add(queued)

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
    ) -> PendingEntry:
        """Append one event on its own and wait until it is a durable, signed entry."""
        return self.run(lambda tx: tx.append(kind, payload, round_id=round_id))

    def rotate_key(self, new: LogSigner) -> AppendedEntry:
        """Hand the log over to a new key and wait until that is durable. A log-level entry, so
        the sequencer's own transaction appends it, under the head lock: first the events
        committed before it (signed by the old key), then a KEY_ROTATED entry signed by the old
        key that carries the rotation note (signed by both); the checkpoint, and every later
        entry, use the new key."""

        def rotation(appender: LogAppender, connection: Any) -> AppendedEntry:
            old, time = appender.signer, self._clock()
            note = KeyRotation(old.verifier, new.verifier, time).sign(old.signer, new.signer)
            entry = appender.append(EntryKind.KEY_ROTATED, {"rotation": str(note)}, time=time)
            self.backend.run(
                connection,
                "INSERT INTO log_keys (key_id, vkey, since_size) VALUES (?, ?, ?)",
                (new.key_id.hex(), new.vkey, entry.index + 1),
            )
            appender.signer = new
            return entry

        if self._closed:
            raise StoreUnavailable("the store is closed")
        with self.backend.unavailable_as_store_error():
            connection = self.backend.connect()
            try:
                done = sequence(self, connection, log_level=rotation)
            finally:
                self.backend.close_quietly(connection)
        self.integrated(done)
        return done.appended[-1]

    def listen(self, listener: CommitListener) -> None:
        """Call ``listener(first_index, entries)`` after each transaction of this process that
        grows the log is durable, with the index of its first entry and every entry's bytes. It
        is called on the thread that committed (a step writer, or the sequencer), so it must
        only hand them on."""
        self._listeners.append(listener)

    def observe(self, observer: BatchObserver) -> None:
        """Call ``observer`` with the measurements of each transaction of this process that
        grows the log (see :mod:`~gnau_service.store.batches`), on the thread that committed."""
        self._observers.append(observer)

    def close(self) -> None:
        """Finish the queued work, stop the writers and the sequencer (after integrating what
        this process committed, if it leads) and release the connections."""
        if self._closed:
            return
        self._closed = True
        for _ in self._writers:
            self._queue.put(_STOP)
        for writer in self._writers:
            writer.join()
        if self._loop_steps is not None:
            self._loop_steps.close()
        if self._sequencer is not None:
            self._sequencer.close()
        failure = StoreUnavailable("the store closed before its change was integrated")
        deliver(self._waiters.expire(failure))
        self.backend.close()

    def __enter__(self) -> Store:
        return self

    # -- the key ----------------------------------------------------------------------------

    def signer_for(self, current_key: str | None) -> LogSigner:
        """This store's signer if it holds the log's current key, after asking the key source
        for it if need be; else KeyNotCurrent."""
        if current_key is None or current_key == self.signer.vkey:
            return self.signer
        found = None
        if self._key_source is not None:
            try:
                found = self._key_source(current_key)
            except Exception as error:  # an unreadable key file: the refusal below says enough
                log.warning("cannot reload the log key: %s", error)
        if found is None or found.vkey != current_key:
            raise KeyNotCurrent(self.signer.vkey, current_key)
        log.warning("log key reloaded: now signing with %s", found.vkey)
        self.signer = found
        return found

    # -- the step writers ---------------------------------------------------------------------

    def _write_loop(self) -> None:
        connection = None
        while True:
            first = self._queue.get()
            if first is _STOP:
                break
            batch: list[_Queued[Any]] = [first]  # type: ignore[list-item]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    self._queue.put(_STOP)  # finish this batch, then stop
                    break
                batch.append(item)  # type: ignore[arg-type]
            # A caller that stopped waiting before its unit started (a cancelled call) gets
            # nothing done; a retry with the same request runs it then.
            batch = [item for item in batch if not item.future.done()]
            if not batch:
                continue
            if connection is None:
                connection = self._connect_or_fail(batch)
                if connection is None:
                    continue
            connection = self._commit_steps(connection, batch)
        if connection is not None:
            self.backend.close_quietly(connection)

    def _connect_or_fail(self, batch: list[_Queued[Any]]) -> Any:
        try:
            return self.backend.connect()
        except Exception as error:
            log.warning("store writer cannot connect: %s", error)
            failure = StoreUnavailable(f"the database is unavailable: {error}")
            deliver([(item.future, item.loop, None, failure) for item in batch])
            return None

    def _commit_steps(self, connection: Any, batch: list[_Queued[Any]]) -> Any:
        """Run one batch of steps in one transaction and commit it, on this thread; the
        connection to carry on with, or None if it should be replaced."""
        steps = _StepBatch(self, batch)
        try:
            steps.begin(connection)
            steps.run(connection)
            steps.commit(connection)
        except Exception as error:
            steps.fail(connection, error)
            return None
        steps.finish(connection)
        return connection

    def _run_step(
        self, connection: Any, item: _Queued[Any], time: str
    ) -> tuple[Any, BaseException | None, list[PendingEntry]]:
        """Run one unit in the open savepoint ``step``: its value, or what it raised (and
        nothing it wrote is kept); and the events its caller waits for. It leaves an empty
        savepoint ``step`` open for the next unit: released and opened again in one round trip
        after a success, and still open after ROLLBACK TO (which keeps the savepoint)."""
        backend = self.backend
        for attempt in range(CONFLICT_RETRIES + 1):
            transaction = Transaction(backend, connection, time, self._waiters.recent)
            try:
                value = item.work(transaction)
            except Exception as failure:
                backend.run(connection, "ROLLBACK TO SAVEPOINT step")
                if attempt < CONFLICT_RETRIES and backend.is_conflict(failure):
                    continue
                return None, failure, []
            backend.run_together(connection, ["RELEASE SAVEPOINT step", "SAVEPOINT step"])
            return value, None, [*transaction.appended, *transaction.awaited]
        raise AssertionError("unreachable")  # pragma: no cover

    # -- integration ------------------------------------------------------------------------

    def integrated(self, done: Integrated) -> None:
        """What follows a durable sequencer transaction of this process: a rotation in it takes
        effect; waiting callers, listeners and observers hear of it."""
        self.signer = done.appender.signer
        deliver(self._waiters.resolve(done.indices))
        if done.appended:
            entries = [entry.data for entry in done.appended]
            for listener in self._listeners:
                listener(done.appended[0].index, entries)
            if self._observers:
                measured = CommittedBatch(
                    units=len(done.appended),
                    kinds=tuple(entry.kind for entry in done.appended),
                    size=done.appender.head.size,
                    seconds=done.seconds,
                    commit_seconds=done.commit_seconds,
                )
                for observer in self._observers:
                    observer(measured)

    def notified(self, notices: Sequence[HeadNotice]) -> None:
        """After another process's sequencer grew the log: answer the callers whose events it
        integrated, from the notices if they carry the indices, else from the database."""
        carried: dict[int, int] = {}
        for notice in notices:
            if notice.indices is None:
                self.check_waiters()
                return
            carried.update(notice.indices)
        deliver(self._waiters.resolve(carried))
        self.expire_waiters()

    def check_waiters(self) -> None:
        """After another process's sequencer grew the log: answer the callers whose events it
        integrated (one query for all of them), and refuse those that waited too long."""
        awaited = self._waiters.awaited()
        if awaited:
            try:
                indices = self.pending_indices(awaited)
            except StoreError as error:
                log.warning("cannot read which pending events are integrated: %s", error)
            else:
                deliver(self._waiters.resolve(indices))
        self.expire_waiters()

    def expire_waiters(self) -> None:
        """Refuse the callers that waited too long for integration (see waiting.py)."""
        deliver(self._waiters.expire())


class _StepBatch:
    """One step transaction, phase by phase: :meth:`begin` and :meth:`commit` may block (the
    write lock, the fsync); :meth:`run` and :meth:`finish` only compute. A step writer thread
    runs them all; an event loop over SQLite runs the two that compute itself (see
    :class:`_LoopSteps`)."""

    def __init__(self, store: Store, batch: list[_Queued[Any]]) -> None:
        self.store = store
        self.batch = batch
        self.started = perf_counter()
        self.committing = 0.0
        self.answers: list[Outcome] = []
        self.waiting: list[Waiting] = []
        self.sequenced: list[tuple[list[AppendedEntry], dict[int, int], LogAppender]] = []
        self.key_rows: list[Row] = []

    def begin(self, connection: Any, *, begun: bool = False) -> None:
        """Begin the transaction (unless ``begun``: the caller did, see
        :meth:`Backend.begin_at_once`), read the log's current key, and open the first unit's
        savepoint: one round trip on PostgreSQL."""
        backend = self.store.backend
        beginning = [] if begun else [backend.begin_sql]
        self.key_rows = backend.run_together(
            connection, [*beginning, CURRENT_KEY_SQL, "SAVEPOINT step"]
        )

    def run(self, connection: Any) -> None:
        """The units, each in its savepoint, and (on SQLite) the integration of their events;
        or, if this process lacks the log's current key, a refusal of all of them."""
        store, backend = self.store, self.store.backend
        try:
            store.signer_for(str(self.key_rows[0][0]) if self.key_rows else None)
        except KeyNotCurrent as refused:
            backend.run(connection, "ROLLBACK")
            self.answers = [(item.future, item.loop, None, refused) for item in self.batch]
            self.batch = []
            return
        time = store._clock()
        for item in self.batch:
            value, failure, entries = store._run_step(connection, item, time)
            if failure is not None or not entries:
                self.answers.append((item.future, item.loop, value, failure))
            else:
                self.waiting.append(Waiting(item.future, item.loop, value, entries))
        if backend.sequences_in_steps:
            while not self.sequenced or len(self.sequenced[-1][1]) == SEQUENCE_BATCH:
                self.sequenced.append(integrate(backend, connection, store.signer_for))
        for waiting in self.waiting:
            store._waiters.add(waiting)
        if store.step_hook is not None:
            store.step_hook()

    def commit(self, connection: Any) -> None:
        """COMMIT (which releases the last, empty, savepoint) and, in a process that is not the
        sequencer, the notice that wakes it, in the same round trip. Should the notice fail
        where the COMMIT did not (a lost connection), the callers are refused though their steps
        committed: a retry of the same request gets its answer, and the sequencer's sweep
        integrates the events."""
        if self.batch:
            self.committing = perf_counter()
            sequencer = self.store._sequencer
            announce = bool(self.waiting) and sequencer is not None and not sequencer.leading
            self.store.backend.run_together(
                connection, self.store.backend.commit_statements(announce_pending=announce)
            )

    def finish(self, connection: Any) -> None:
        """Answer who can be answered now; hand the events to the sequencer."""
        store = self.store
        deliver(self.answers)
        now = perf_counter()
        for appended, indices, appender in self.sequenced:
            seconds, commit_seconds = now - self.started, now - self.committing
            store.integrated(
                Integrated(tuple(appended), indices, appender, seconds, commit_seconds)
            )
        if self.waiting and store._sequencer is not None:
            store._sequencer.wake()

    def fail(self, connection: Any, error: Exception) -> None:
        """Nothing of the batch was committed: every caller is refused, retryably."""
        # The server reports it, once per outage; a traceback here would repeat per batch.
        log.warning("store step batch failed; nothing in it was committed: %s", error)
        for waiting in self.waiting:
            self.store._waiters.discard(waiting)
        if connection is not None:
            self.store.backend.rollback_quietly(connection)
            self.store.backend.close_quietly(connection)
        failure = StoreUnavailable(f"the database refused the write: {error}")
        deliver([(item.future, item.loop, None, failure) for item in self.batch])


class _LoopSteps:
    """Steps on an event loop, for an in-process database (SQLite; see :meth:`Store.run_async`).

    Units queue while a batch commits; the next batch takes them all. The loop runs the units and
    the integration itself; what may block runs on a thread of its own: COMMIT and its fsync, and
    taking the write lock while another connection holds it (the loop takes it itself when it is
    free, as it nearly always is). A writer thread would give up the GIL at every SQLite statement
    and wait for the busy loop to hand it back, which costs more than the statements; and the loop
    hands a thread its BEGIN only to wait for it to get the GIL back (about 5 ms a batch under
    load: the interpreter's switch interval), so it no longer does when it need not.
    """

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop
        self._pending: list[_Queued[Any]] = []
        self._draining: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one
        self._connection: Any = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="gnau-store-commit")

    def close(self) -> None:
        """Let the connection go: now if idle, else when the batch in hand ends."""
        if self._draining is None:
            self._release()

    def _release(self) -> None:
        if self._connection is not None:
            self.store.backend.close_quietly(self._connection)
            self._connection = None
        self._thread.shutdown(wait=False)

    async def _blocking(self, function: Callable[..., T], *args: Any) -> T:
        return await self.loop.run_in_executor(self._thread, functools.partial(function, *args))

    def add(self, queued: _Queued[Any]) -> None:
        self._pending.append(queued)
        if self._draining is None:
            self._draining = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending:
                size = self.store._max_batch
                batch, self._pending = self._pending[:size], self._pending[size:]
                await self._commit([item for item in batch if not item.future.done()])
        finally:
            self._draining = None
            if self.store._closed:
                self._release()

    async def _commit(self, batch: list[_Queued[Any]]) -> None:
        if not batch:
            return
        steps = _StepBatch(self.store, batch)
        try:
            if self._connection is None:
                self._connection = await self._blocking(self.store.backend.connect)
            if self.store.backend.begin_at_once(self._connection):
                steps.begin(self._connection, begun=True)
            else:
                await self._blocking(steps.begin, self._connection)
            steps.run(self._connection)
            await self._blocking(steps.commit, self._connection)
        except Exception as error:
            steps.fail(self._connection, error)
            self._connection = None
            return
        steps.finish(self._connection)


class _NodeReader:
    """Complete-subtree hashes, read from the log_nodes table."""

    def __init__(self, backend: Backend, connection: Any) -> None:
        self._backend = backend
        self._connection = connection

    def node(self, level: int, index: int) -> bytes:
        rows = self._backend.run(
            self._connection,
            "SELECT hash FROM log_nodes WHERE level = ? AND idx = ?",
            (level, index),
        )
        if not rows:
            raise StoreError(f"tree node ({level}, {index}) is missing from the store")
        return bytes(rows[0][0])
