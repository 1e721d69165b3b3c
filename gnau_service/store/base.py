"""One storage interface over SQL: group-committed writes that append to the log, and reads.

Every write is a *unit of work*: a function that receives a :class:`Transaction`, reads and
writes the store's tables through it, and appends log entries. Queued units run in batches
inside one database transaction (group commit), then the batch's entries, tree nodes, head and a
signed checkpoint are written and the transaction commits. A unit's caller is answered only
after that commit, so an acknowledged entry is durable. Units run on the store's writer thread,
or, for callers on an event loop over an in-process database, on that loop (see
:meth:`Store.run_async`). Either way batches hold the write lock one at a time, and a unit
must not block.

A unit that raises changes nothing and spares its neighbours. Most refusals raise before the
unit writes anything, so a batch first runs optimistically: no savepoints, and on PostgreSQL in
pipeline mode (a round trip per read, none per write). If a unit raises after writing, or the
database refuses anything, the whole batch is rolled back and run again with each unit in its
own savepoint, so that only the guilty unit fails. Nothing was committed or answered before
that second run, so running a unit twice is safe.

Indices are gap-free because each batch reads the log head under a write lock (SQLite's
``BEGIN IMMEDIATE``; PostgreSQL's ``SELECT ... FOR UPDATE`` on the one-row head), so several
processes may share one PostgreSQL log.

Under the same lock each batch reads the log's current key (the ``log_keys`` row with the
largest ``since_size``), so a key rotated by another process is seen before anything is signed:
a store whose key is no longer current asks its ``key_source`` for the current one (a running
server rereads its key file) and, if that has no key for it either, refuses the batch with
:class:`KeyNotCurrent` (a :class:`StoreUnavailable`: nothing is written and a retry may succeed
once the key file holds the current key). No entry is ever signed by a retired key.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.log import AppendedEntry, LogAppender, LogHead
from gnau_service.audit.merkle import Frontier, consistency_proof, inclusion_proof
from gnau_service.audit.signing import KeyRotation, LogSigner
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.store.batches import BatchObserver, CommittedBatch

if TYPE_CHECKING:
    from gnau_service.store.migrations import Migration
    from gnau_service.store.schema import SchemaState

T = TypeVar("T")
Row = tuple[Any, ...]

MAX_BATCH: Final = 512
MAX_READ_ENTRIES: Final = 10_000

log = logging.getLogger(__name__)


class StoreError(RuntimeError):
    """The store could not do what was asked (a database failure, or a store already closed)."""


class StoreUnavailable(StoreError):  # noqa: N818  (a condition a caller retries)
    """The database cannot be used right now (unreachable, read-only, full, or the store is
    closed): nothing was done, and the same call may succeed later. The message names the cause,
    for the operator's log; it may hold paths or host names, so it is not for clients."""


class KeyNotCurrent(StoreUnavailable):
    """This process's log key is not the log's current key (another process rotated it, or the
    key file holds a wrong key): it signs nothing until it has the current key. Both keys are
    named by their public verifier keys."""

    def __init__(self, held: str, current: str) -> None:
        super().__init__(
            f"the log's current key is {current}, but this process holds {held}: it writes "
            "nothing until its key file holds the current key (see docs/operations.md)"
        )
        self.held = held
        self.current = current


#: Looks for the signer of the log's current key, given that key's verifier key string; None if
#: it has none (for a server: its key file, reread).
KeySource = Callable[[str], LogSigner | None]

#: The log's current key: the one whose ``since_size`` is the largest (a rotation's new key
#: starts after the rotation entry). Read in its own statement after the head's lock is held: a
#: subquery in the locking statement would read the table as it was before the lock was granted.
CURRENT_KEY_SQL: Final = "SELECT vkey FROM log_keys ORDER BY since_size DESC, key_id LIMIT 1"


def utc_now() -> str:
    """The current time in the audit log's timestamp form."""
    return format_utc_timestamp(datetime.now(UTC))


class Backend(ABC):
    """A SQL database: its connections, its dialect, and its schema."""

    #: How a batch starts; SQLite takes the write lock at once with IMMEDIATE.
    begin_sql: str = "BEGIN"
    #: Whether statements run inside this process in microseconds (SQLite): an event loop then
    #: runs its callers' units itself (see :meth:`Store.run_async`). Over a network, statements
    #: wait, and the writer thread does that waiting.
    runs_in_process: bool = False
    #: Reads the head row; PostgreSQL appends FOR UPDATE so writers queue on it. Every write
    #: transaction starts here, so writers (in every process) run one at a time and a unit's
    #: reads need no locks of their own.
    read_head_sql: str = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1"
    #: The schema migrations this gnau knows, in order (each backend's constructor sets them).
    migrations: Sequence[Migration]

    @abstractmethod
    def connect(self) -> Any:
        """A new autocommit connection, for the writer thread (or a schema change)."""

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

    def announce_size(self, connection: Any, size: int) -> None:  # noqa: B027  (most have none)
        """Tell other processes, when this transaction commits, that the log has grown to
        ``size`` (PostgreSQL's NOTIFY). Processes of a database without it learn by polling."""

    async def watch_sizes(self) -> AsyncIterator[int]:
        """The log's size each time another process grows it, for as long as the caller listens
        (PostgreSQL's LISTEN); a database that cannot say so yields nothing and returns."""
        return
        yield  # an async generator that yields nothing

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
        """Run one statement; a SELECT's rows are fetched (which waits for them in a pipeline)."""
        cursor = connection.execute(self.sql(text), tuple(params))
        return list(cursor.fetchall()) if is_query(text) else []

    def run_queries(
        self, connection: Any, queries: Sequence[tuple[str, Sequence[object]]]
    ) -> list[list[Row]]:
        """Run several SELECTs, then fetch the rows of each: in a pipeline, one round trip."""
        cursors = [connection.execute(self.sql(text), tuple(params)) for text, params in queries]
        return [list(cursor.fetchall()) for cursor in cursors]

    def run_many(self, connection: Any, text: str, rows: Sequence[Sequence[object]]) -> None:
        if rows:
            connection.cursor().executemany(self.sql(text), rows)

    def reset(self, connection: Any) -> Any:
        """A connection for a batch's careful rerun, after its optimistic run failed: this one,
        rolled back."""
        _rollback_quietly(self, connection)
        return connection

    def pipelined(self, connection: Any) -> AbstractContextManager[Any]:
        """Send the statements run inside it without waiting for each answer, where the
        database can (writes are not awaited; reads wait for everything before them)."""
        return contextlib.nullcontext()

    def close(self) -> None:  # noqa: B027  (backends with pools override it)
        """Release the backend's connections."""


def is_query(text: str) -> bool:
    """Whether a statement returns rows: the store's statements that do all start with SELECT."""
    return text.lstrip()[:6].upper() == "SELECT"


class Transaction:
    """What a unit of work may do: SQL on the store's tables, and appending log entries."""

    def __init__(self, backend: Backend, connection: Any, log_appender: LogAppender, time: str):
        self._backend = backend
        self._connection = connection
        self._log = log_appender
        self.time = time
        self.appended: list[AppendedEntry] = []
        #: Whether a failure of this unit needs a rollback: it wrote, or the database refused.
        self.touched = False

    def execute(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement (``?`` placeholders) and return its rows, if any."""
        if not is_query(text):
            self.touched = True
        try:
            with self._backend.unavailable_as_store_error():
                return self._backend.run(self._connection, text, params)
        except Exception:
            self.touched = True
            raise

    def query_all(self, *queries: tuple[str, Sequence[object]]) -> list[list[Row]]:
        """Run several SELECTs and return the rows of each: on PostgreSQL, one round trip."""
        try:
            with self._backend.unavailable_as_store_error():
                return self._backend.run_queries(self._connection, queries)
        except Exception:
            self.touched = True
            raise

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
    ) -> AppendedEntry:
        """Append a signed entry; it is written with the batch and durable when the unit returns."""
        entry = self._log.append(kind, payload, time=self.time, round_id=round_id)
        self.appended.append(entry)
        return entry

    def rotate_key(self, new: LogSigner) -> AppendedEntry:
        """Hand the log over to a new key: a KEY_ROTATED entry signed by the old key carries the
        rotation note (signed by both), and every later entry and checkpoint uses the new key."""
        old = self._log.signer
        note = KeyRotation(old.verifier, new.verifier, self.time).sign(old.signer, new.signer)
        entry = self.append(EntryKind.KEY_ROTATED, {"rotation": str(note)})
        self.execute(
            "INSERT INTO log_keys (key_id, vkey, since_size) VALUES (?, ?, ?)",
            (new.key_id.hex(), new.vkey, entry.index + 1),
        )
        self._log.signer = new
        return entry


Work = Callable[[Transaction], T]
#: Told of each durable batch that grows the log: its first entry's index, and every entry.
CommitListener = Callable[[int, list[bytes]], None]


@dataclass
class _Queued(Generic[T]):
    """A unit and who waits for it: a thread (a concurrent future) or an event loop."""

    work: Work[T]
    future: Future[T] | asyncio.Future[T] = field(default_factory=Future)
    loop: asyncio.AbstractEventLoop | None = None


#: A unit's result: its value, or what it raised.
_Outcome = tuple[_Queued[Any], Any, BaseException | None]

_STOP: Final = object()


class _RetryCarefully(Exception):  # noqa: N818  (control flow inside the writer)
    """A unit failed after writing: the optimistic run of its batch must be undone."""


@dataclass
class _RanBatch:
    """A batch whose units have run, before its log is written and it commits."""

    appender: LogAppender
    appended: list[AppendedEntry]
    outcomes: list[_Outcome]


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

    def _check_size(self, size: int) -> None:
        current = self.size()
        if size > current:
            raise ValueError(f"the log has {current} entries, fewer than the {size} asked for")


class Store(LogReader):
    """The log and the service's tables in one SQL database, written by group commit."""

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
        self._loop_writer: _LoopWriter | None = None
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
                _close_quietly(connection)
        except StoreError:
            backend.close()
            raise
        except Exception as error:
            backend.close()
            message = str(error).strip().partition("\n")[0]
            raise StoreError(f"{backend}: cannot register the log key: {message}") from error
        self._writer = threading.Thread(target=self._write_loop, name="gnau-store-writer")
        self._writer.daemon = True
        self._writer.start()

    # -- writing ----------------------------------------------------------------------------

    def submit(self, work: Work[T]) -> Future[T]:
        """Queue a unit of work; the future resolves after its batch commits. A unit whose
        future is cancelled before its batch starts is not run."""
        future: Future[T] = Future()
        self._enqueue(_Queued(work, future))
        return future

    def run(self, work: Work[T]) -> T:
        """Run a unit of work and wait until it is durable."""
        return self.submit(work).result()

    async def run_async(self, work: Work[T]) -> T:
        """Run a unit of work from an event loop and await its commit.

        On an in-process database the loop runs the batch's units itself and hands only what
        may block (taking the write lock, COMMIT and its fsync) to a thread: a writer thread
        would give up the GIL at every statement and wait for the loop to hand it back, which
        costs more than the statements. Otherwise the writer thread runs the unit and wakes
        each loop once per batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._enqueue(_Queued(work, future, loop))
        return await future

    def _enqueue(self, queued: _Queued[Any]) -> None:
        """Hand a unit to its writer: its event loop's, for a loop over an in-process database;
        else the writer thread."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = queued.loop
        if loop is None or not self.backend.runs_in_process:
            self._queue.put(queued)
            return
        if self._loop_writer is None or self._loop_writer.loop is not loop:
            if self._loop_writer is not None:
                self._loop_writer.close()
            self._loop_writer = _LoopWriter(self, loop)
        self._loop_writer.add(queued)

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
    ) -> AppendedEntry:
        """Append one entry on its own and wait until it is durable."""
        return self.run(lambda tx: tx.append(kind, payload, round_id=round_id))

    def rotate_key(self, new: LogSigner) -> AppendedEntry:
        """Rotate the log key (see :meth:`Transaction.rotate_key`) and wait until it is durable."""
        return self.run(lambda tx: tx.rotate_key(new))

    def listen(self, listener: CommitListener) -> None:
        """Call ``listener(first_index, entries)`` after each batch that grows the log is durable,
        with the index of its first entry and every entry's bytes. It is called on the thread
        that committed (the writer thread, or an event loop), so it must only hand them on."""
        self._listeners.append(listener)

    def observe(self, observer: BatchObserver) -> None:
        """Call ``observer`` with each committed batch's measurements (see
        :mod:`~gnau_service.store.batches`), on the thread that committed it."""
        self._observers.append(observer)

    def close(self) -> None:
        """Finish the queued work, stop the writer and release the connections."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._writer.join()
        if self._loop_writer is not None:
            self._loop_writer.close()
        self.backend.close()

    def __enter__(self) -> Store:
        return self

    def _write_loop(self) -> None:
        connection = None
        while True:
            first = self._queue.get()
            if first is _STOP:
                break
            batch: list[_Queued[Any]] = [cast(_Queued[Any], first)]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    self._queue.put(_STOP)  # finish this batch, then stop
                    break
                batch.append(cast(_Queued[Any], item))
            if connection is None:
                connection = self._connect_or_fail(batch)
                if connection is None:
                    continue
            connection = self._commit_batch(connection, batch)
        if connection is not None:
            connection.close()

    def _connect_or_fail(self, batch: list[_Queued[Any]]) -> Any:
        try:
            return self.backend.connect()
        except Exception as error:
            log.warning("store writer cannot connect: %s", error)
            failure = StoreUnavailable(f"the database is unavailable: {error}")
            _deliver([(item, None, failure) for item in batch])
            return None

    def _commit_batch(self, connection: Any, batch: list[_Queued[Any]]) -> Any:
        """Run, write and commit one batch; the connection to carry on with, or None if it
        should be replaced."""
        # A caller that stopped waiting before its unit started (a cancelled call) gets nothing
        # done; a retry with the same request runs it then.
        batch = [item for item in batch if not item.future.done()]
        if not batch:
            return connection
        try:
            try:
                outcomes = self._run_batch(connection, batch, careful=False)
            except Exception:
                connection = self.backend.reset(connection)
                outcomes = self._run_batch(connection, batch, careful=True)
        except Exception as error:
            # The server reports it, once per outage; a traceback here would repeat per batch.
            log.warning("store batch failed; nothing in it was committed: %s", error)
            _rollback_quietly(self.backend, connection)
            _close_quietly(connection)
            failure = StoreUnavailable(f"the database refused the write: {error}")
            _deliver([(item, None, failure) for item in batch])
            return None
        _deliver(outcomes)
        return connection

    def _run_batch(
        self, connection: Any, batch: list[_Queued[Any]], *, careful: bool
    ) -> list[_Outcome]:
        """One transaction over the batch: optimistic (raises if that is not enough) or
        careful (a savepoint per unit)."""
        started = perf_counter()
        with contextlib.nullcontext() if careful else self.backend.pipelined(connection):
            head, current_key = self._begin(connection)
            ran = self._run_units(connection, head, current_key, batch, careful=careful)
            commit_seconds = self._write_and_commit(connection, ran)
        self._committed_batch(ran, started, commit_seconds, careful=careful)
        return ran.outcomes

    def _begin(self, connection: Any) -> tuple[LogHead, str | None]:
        """Start a batch's transaction, holding the write lock, and read the log head and the
        log's current key (one round trip in a pipeline)."""
        self.backend.run(connection, self.backend.begin_sql)
        head_rows, key_rows = self.backend.run_queries(
            connection, [(self.backend.read_head_sql, ()), (CURRENT_KEY_SQL, ())]
        )
        return LogHead.decode(*head_rows[0]), str(key_rows[0][0]) if key_rows else None

    def _current_signer(self, current_key: str | None) -> LogSigner | None:
        """This store's signer if it holds the log's current key, after asking the key source
        for it if need be; None if neither has it."""
        if current_key is None or current_key == self.signer.vkey:
            return self.signer
        found = None
        if self._key_source is not None:
            try:
                found = self._key_source(current_key)
            except Exception as error:  # an unreadable key file: the refusal below says enough
                log.warning("cannot reload the log key: %s", error)
        if found is None or found.vkey != current_key:
            return None
        log.warning("log key reloaded: now signing with %s", found.vkey)
        self.signer = found
        return found

    def _run_units(
        self,
        connection: Any,
        head: LogHead,
        current_key: str | None,
        batch: list[_Queued[Any]],
        *,
        careful: bool,
    ) -> _RanBatch:
        signer = self._current_signer(current_key)
        if signer is None:
            refusal = KeyNotCurrent(self.signer.vkey, str(current_key))
            return _RanBatch(
                LogAppender(self.signer, head), [], [(item, None, refusal) for item in batch]
            )
        appender = LogAppender(signer, head)
        appended: list[AppendedEntry] = []
        time = self._clock()
        outcomes = [
            self._run_unit(connection, appender, appended, time, item, careful=careful)
            for item in batch
        ]
        return _RanBatch(appender, appended, outcomes)

    def _write_and_commit(self, connection: Any, ran: _RanBatch) -> float:
        """Write the batch's log and commit; the seconds COMMIT took."""
        if ran.appended:
            self._write_log(connection, ran.appender, ran.appended)
        committing = perf_counter()
        self.backend.run(connection, "COMMIT")
        return perf_counter() - committing

    def _committed_batch(
        self, ran: _RanBatch, started: float, commit_seconds: float, *, careful: bool
    ) -> None:
        """What follows a durable batch: a rotation in it takes effect; listeners hear of it;
        observers get its measurements."""
        self.signer = ran.appender.signer
        if ran.appended:
            entries = [entry.data for entry in ran.appended]
            for listener in self._listeners:
                listener(ran.appended[0].index, entries)
        if self._observers:
            measured = CommittedBatch(
                units=len(ran.outcomes),
                kinds=tuple(entry.kind for entry in ran.appended),
                size=ran.appender.head.size,
                seconds=perf_counter() - started,
                commit_seconds=commit_seconds,
                careful=careful,
            )
            for observer in self._observers:
                observer(measured)

    def _run_unit(
        self,
        connection: Any,
        appender: LogAppender,
        appended: list[AppendedEntry],
        time: str,
        item: _Queued[Any],
        *,
        careful: bool,
    ) -> _Outcome:
        backend = self.backend
        head_before, signer_before = appender.head, appender.signer
        if careful:
            backend.run(connection, "SAVEPOINT unit")
        transaction = Transaction(backend, connection, appender, time)
        try:
            value = item.work(transaction)
        except Exception as failure:
            if careful:
                backend.run(connection, "ROLLBACK TO SAVEPOINT unit")
                backend.run(connection, "RELEASE SAVEPOINT unit")
            elif transaction.touched:
                raise _RetryCarefully from failure
            appender.head, appender.signer = head_before, signer_before
            return item, None, failure
        if careful:
            backend.run(connection, "RELEASE SAVEPOINT unit")
        appended.extend(transaction.appended)
        return item, value, None

    def _write_log(
        self, connection: Any, appender: LogAppender, appended: list[AppendedEntry]
    ) -> None:
        backend = self.backend
        backend.run_many(
            connection,
            "INSERT INTO log_entries (idx, kind, round_id, data) VALUES (?, ?, ?, ?)",
            [(e.index, str(e.kind), e.round_id, e.data) for e in appended],
        )
        backend.run_many(
            connection,
            "INSERT INTO log_nodes (level, idx, hash) VALUES (?, ?, ?)",
            [(n.level, n.index, n.hash) for e in appended for n in e.nodes],
        )
        size, prev_hash, frontier = appender.head.encode()
        backend.run(
            connection,
            "UPDATE log_head SET size = ?, prev_hash = ?, frontier = ? WHERE id = 1",
            (size, prev_hash, frontier),
        )
        backend.announce_size(connection, size)
        backend.run(
            connection,
            "INSERT INTO log_checkpoints (size, note) VALUES (?, ?)",
            (size, str(appender.checkpoint())),
        )


class _LoopWriter:
    """Group commit on an event loop, for an in-process database (see :meth:`Store.run_async`).

    Units queue while a batch commits; the next batch takes them all. Its steps are the writer
    thread's, so a batch ends the same way on either path, the careful rerun included. What may
    block (taking the write lock, COMMIT) runs on a thread of its own: on the loop's shared
    default executor it would queue behind every other ``asyncio.to_thread`` caller.
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
            _close_quietly(self._connection)
            self._connection = None
        self._thread.shutdown(wait=False)

    async def _blocking(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.loop.run_in_executor(
            self._thread, functools.partial(function, *args, **kwargs)
        )

    def add(self, queued: _Queued[Any]) -> None:
        self._pending.append(queued)
        if self._draining is None:
            self._draining = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending:
                size = self.store._max_batch
                batch, self._pending = self._pending[:size], self._pending[size:]
                await self._commit(batch)
        finally:
            self._draining = None
            if self.store._closed:
                self._release()

    async def _commit(self, batch: list[_Queued[Any]]) -> None:
        store, backend = self.store, self.store.backend
        batch = [item for item in batch if not item.future.done()]
        if not batch:
            return
        try:
            if self._connection is None:
                self._connection = await self._blocking(backend.connect)
            connection = self._connection
            try:
                started = perf_counter()
                head, current_key = await self._blocking(store._begin, connection)
                ran = store._run_units(connection, head, current_key, batch, careful=False)
                commit_seconds = await self._blocking(store._write_and_commit, connection, ran)
                store._committed_batch(ran, started, commit_seconds, careful=False)
                outcomes = ran.outcomes
            except Exception:
                connection = self._connection = await self._blocking(backend.reset, connection)
                outcomes = await self._blocking(store._run_batch, connection, batch, careful=True)
        except Exception as error:
            log.warning("store batch failed; nothing in it was committed: %s", error)
            if self._connection is not None:
                await self._blocking(_rollback_quietly, backend, self._connection)
                _close_quietly(self._connection)
                self._connection = None
            failure = StoreUnavailable(f"the database refused the write: {error}")
            outcomes = [(item, None, failure) for item in batch]
        for outcome in outcomes:
            _settle(outcome)


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


def _deliver(outcomes: list[_Outcome]) -> None:
    """Answer every caller: threads directly, each event loop with one wake-up for all of its."""
    per_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for outcome in outcomes:
        loop = outcome[0].loop
        if loop is None:
            _settle(outcome)
        else:
            per_loop.setdefault(loop, []).append(outcome)
    for loop, waiting in per_loop.items():
        # A closed loop has nobody left waiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, waiting)


def _settle_all(outcomes: list[_Outcome]) -> None:
    for outcome in outcomes:
        _settle(outcome)


def _settle(outcome: _Outcome) -> None:
    item, value, failure = outcome
    # Its caller may have stopped waiting (a cancelled call) while the unit ran.
    with contextlib.suppress(InvalidStateError, asyncio.InvalidStateError):
        if failure is None:
            item.future.set_result(value)
        else:
            item.future.set_exception(failure)


def _rollback_quietly(backend: Backend, connection: Any) -> None:
    # The connection is replaced after a failed batch, so a failed rollback changes nothing.
    with contextlib.suppress(Exception):
        backend.run(connection, "ROLLBACK")


def _close_quietly(connection: Any) -> None:
    with contextlib.suppress(Exception):
        connection.close()
