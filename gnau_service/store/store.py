"""The store's write side: the log and the service's tables in one SQL database.

A round step is a *unit of work* (:data:`~gnau_service.store.transaction.Work`): the server
awaits :meth:`Store.run_async`, which hands the unit to the backend's coordination
(:mod:`~gnau_service.store.coordination`) and returns once the unit's events are durable, signed
log entries covered by a signed checkpoint. The store then hears of each integration
(:meth:`Store.integrated`, :meth:`Store.notified`) and answers the callers waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from time import monotonic
from typing import TypeVar

from gnau_service.audit.actors import CONSOLE
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.log import AppendedEntry, LogAppender
from gnau_service.audit.signing import KeyRotation, LogSigner
from gnau_service.store.backend import Backend
from gnau_service.store.batches import BatchObserver, CommittedBatch
from gnau_service.store.connections import Connection
from gnau_service.store.coordination import Integrated, QueuedUnit
from gnau_service.store.errors import KeyNotCurrent, StoreError, StoreUnavailable
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.lease import (
    DEFAULT_LEASE_SECONDS,
    STALE_READING_SECONDS,
    LogProgress,
    stall_bound,
)
from gnau_service.store.reader import LogReader
from gnau_service.store.schema import create_schema
from gnau_service.store.sequencer import sequence
from gnau_service.store.transaction import Work, utc_now
from gnau_service.store.waiting import ANSWER_MARGIN_SECONDS, Waiters, deliver

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Looks for the signer of the log's current key, given that key's verifier key string; None if
#: it has none (for a server: its key file, reread).
KeySource = Callable[[str], LogSigner | None]
#: Told of each durable batch that grows the log: its first entry's index, and every entry.
CommitListener = Callable[[int, list[bytes]], None]


class Store(LogReader):
    """The log and the service's tables in one SQL database: round steps, and their integration
    into the log as the backend coordinates it."""

    def __init__(
        self,
        backend: Backend,
        signer: LogSigner,
        *,
        migrate: bool = False,
        key_source: KeySource | None = None,
    ) -> None:
        super().__init__(backend)
        self.signer = signer
        self._key_source = key_source
        self._closed = False
        self._listeners: list[CommitListener] = []
        self._observers: list[BatchObserver] = []
        lease = backend.lease_seconds
        #: How long a committed event may wait for integration before the log is stalled
        #: (None where each step integrates its own: SQLite).
        self.stall_seconds = None if lease is None else stall_bound(lease)
        #: The callers of this process waiting for their events to be integrated.
        self.waiters = Waiters(expire_after=stall_bound(lease or DEFAULT_LEASE_SECONDS))
        # The backends raise a StoreError naming their database if they cannot connect or set
        # up the schema; the rest of start-up is wrapped the same way.
        try:
            connection = backend.connect()
            try:
                #: The migrations this start applied (only a new database's, unless ``migrate``).
                self.migrated = create_schema(backend, connection, migrate=migrate)
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
        self._coordination = backend.coordinate(self)

    # -- writing ----------------------------------------------------------------------------

    async def run_async(self, work: Work[T], *, deadline: float | None = None) -> T:
        """Run a unit of work from an event loop and await the integration of its events. A
        unit whose caller stops waiting before its step transaction starts is not run. A call's
        ``deadline`` (a ``time.monotonic()`` value) lets a caller still waiting on a stalled log
        be answered LogStalled before it, as :mod:`~gnau_service.store.waiting` says."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if deadline is None:
            self._coordination.enqueue(QueuedUnit(work, future))
            return await future
        self.waiters.queue(future)
        answer_time = deadline - ANSWER_MARGIN_SECONDS - monotonic()
        answer_early = loop.call_later(answer_time, self.waiters.answer_early, future)
        self._coordination.enqueue(QueuedUnit(work, future))
        try:
            return await future
        finally:
            answer_early.cancel()
            self.waiters.dequeue(future)

    async def scrub_deleted_rows(self, *, deadline: float | None = None) -> None:
        """Drop the older copies of rows that a committed unit deleted to erase them, where the
        backend keeps some the service can drop (SQLite's ``-wal`` file); raises
        :class:`~gnau_service.store.errors.ScrubIncomplete` if it could not now (see
        :meth:`~gnau_service.store.backend.Backend.scrub_deleted_rows`), in time to be answered
        before a call's ``deadline`` (as :meth:`run_async` takes it)."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        give_up_at = None if deadline is None else deadline - ANSWER_MARGIN_SECONDS
        await asyncio.to_thread(self.backend.scrub_deleted_rows, give_up_at)

    def rotate_key(self, new: LogSigner) -> AppendedEntry:
        """Hand the log over to a new key and wait until that is durable. A log-level entry, so
        the sequencer's own transaction appends it, under the head lock: first the events
        committed before it (signed by the old key), then a KEY_ROTATED entry signed by the old
        key that carries the rotation note (signed by both); the checkpoint, and every later
        entry, use the new key."""

        def rotation(appender: LogAppender, connection: Connection) -> AppendedEntry:
            old, time = appender.signer, utc_now()
            note = KeyRotation(old.verifier, new.verifier, time).sign(old.signer, new.signer)
            # Only `gnau key rotate` rotates, on the host with the service's files: the console.
            payload: dict[str, JsonValue] = {"rotation": str(note), "actor": CONSOLE}
            entry = appender.append(EntryKind.KEY_ROTATED, payload, time=time)
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
            # On PostgreSQL a session bounded like the sequencer's, which the rotation's
            # transaction holds the lease's row in too: one stopped inside it is ended after the
            # lease, as a stopped sequencer is (lease.py).
            connection = self.backend.connect_log_work()
            try:
                done = sequence(self.backend, connection, self.signer_for, log_level=rotation)
            finally:
                self.backend.close_quietly(connection)
        self.integrated(done)
        return done.appended[-1]

    def listen(self, listener: CommitListener) -> None:
        """Call ``listener(first_index, entries)`` after each transaction of this process that
        grows the log is durable, with the index of its first entry and every entry's bytes. It
        is called on the thread that committed (the event loop, a step writer, or the
        sequencer), so it must only hand them on."""
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
        self._coordination.close()
        failure = StoreUnavailable("the store closed before its change was integrated")
        deliver(self.waiters.expire(failure))
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

    # -- progress ---------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """Whether this process integrates the log's events now (always, on SQLite)."""
        return self._coordination.leading

    @property
    def writers_contend(self) -> bool:
        """Whether other processes have lately waited for the one writer this store's step
        transactions take turns as (SQLite under ``--workers``): a step is then best computed
        before its unit of work is queued."""
        return self._coordination.writers_contend

    def log_progress(self) -> LogProgress | None:
        """The lease and outbox as this process's sequencer last read them (None on SQLite)."""
        return self._coordination.progress

    def integration_wait(self) -> float:
        """How long the oldest committed event not yet integrated has waited, here or in any
        process of the log, as far as this process can tell (seconds). A reading that is not
        renewed (this process's sequencer cannot reach the database) counts as its age."""
        wait = self.waiters.oldest()
        progress = self._coordination.progress
        if progress is not None:
            age = monotonic() - progress.read_at
            seen = progress.oldest_wait + age if progress.oldest_wait else 0.0
            wait = max(wait, seen, age if age > STALE_READING_SECONDS else 0.0)
        return wait

    def stalled(self) -> bool:
        """Whether the log has stalled: an event waited longer than :attr:`stall_seconds`."""
        return self.stall_seconds is not None and self.integration_wait() > self.stall_seconds

    # -- integration ------------------------------------------------------------------------

    def integrated(self, done: Integrated) -> None:
        """What follows a durable integration of this process: a rotation in it takes effect;
        waiting callers, listeners and observers hear of it."""
        self.signer = done.appender.signer
        self.waiters.moved()
        if done.appended:
            # Listeners first: a caller answered next finds its entries in the log's tail.
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
        deliver(self.waiters.resolve(done.indices))

    def notified(self, notices: Sequence[HeadNotice]) -> None:
        """After another process's sequencer grew the log: answer the callers whose events it
        integrated, from the notices if they carry the indices, else from the database."""
        if notices:
            self.waiters.moved()
        carried: dict[int, int] = {}
        for notice in notices:
            if notice.indices is None:
                self.check_waiters()
                return
            carried.update(notice.indices)
        deliver(self.waiters.resolve(carried))
        self.expire_waiters()

    def check_waiters(self) -> None:
        """After another process's sequencer grew the log: answer the callers whose events it
        integrated (one query for all of them), and refuse those that waited too long."""
        awaited = self.waiters.awaited()
        if awaited:
            try:
                indices = self.pending_indices(awaited)
            except StoreError as error:
                log.warning("cannot read which pending events are integrated: %s", error)
            else:
                deliver(self.waiters.resolve(indices))
        self.expire_waiters()

    def expire_waiters(self) -> None:
        """Refuse the callers that waited too long for integration (see waiting.py)."""
        deliver(self.waiters.expire())
