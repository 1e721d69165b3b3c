"""The step transaction: queued units of work run in one database transaction (group commit).

Each unit runs in its own savepoint (named ``unit``), so that a unit that raises changes nothing
and spares its neighbours. On PostgreSQL a unit that lost a race with another process (a unique
key taken meanwhile, a deadlock) is run again in a fresh savepoint, where it sees the winner's
committed row. A caller whose unit appended events (or refers to events not integrated yet) is
registered as waiting (:mod:`~gnau_service.store.waiting`) *before* the COMMIT, and answered
once its events are integrated; the others are answered after the COMMIT.

Each step transaction reads the log's current key (the ``log_keys`` row with the largest
``since_size``): a store whose key is no longer current asks its ``key_source`` for the current
one (a running server rereads its key file) and, if that has no key for it either, refuses the
batch with :class:`~gnau_service.store.errors.KeyNotCurrent` (a StoreUnavailable: nothing is
written and a retry may succeed once the key file holds the current key). The sequencer checks
the same under the head lock before it signs, so no entry is ever signed by a retired key.

:class:`StepBatch` is one such transaction, phase by phase; each backend's coordination
(:mod:`~gnau_service.store.in_step`, :mod:`~gnau_service.store.step_writers`) says what else
the transaction does for the log, and where the phases run.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from time import perf_counter
from typing import Any, Final

from gnau_service.store.backend import CURRENT_KEY_SQL, Backend
from gnau_service.store.connections import Connection, Row
from gnau_service.store.coordination import QueuedUnit, WritingStore
from gnau_service.store.errors import KeyNotCurrent, StoreUnavailable
from gnau_service.store.transaction import Transaction, utc_now
from gnau_service.store.waiting import Reply, Waiting, deliver

#: Units in one step transaction at most.
MAX_BATCH: Final = 512
#: Times a unit that lost a race with another writer (see Backend.is_conflict) is run again.
CONFLICT_RETRIES: Final = 3

log = logging.getLogger(__name__)


class StepBatch(ABC):
    """One step transaction, phase by phase: :meth:`begin` and :meth:`commit` may block (the
    write lock, the fsync); :meth:`run` and :meth:`finish` only compute, so a coordination may
    run those two on an event loop (see :mod:`~gnau_service.store.in_step`)."""

    def __init__(self, backend: Backend, store: WritingStore, batch: list[QueuedUnit[Any]]):
        self.backend = backend
        self.store = store
        self.batch = batch
        self.started = perf_counter()
        self.committing = 0.0
        self.replies: list[Reply] = []
        self.waiting: list[Waiting] = []
        self.key_rows: list[Row] = []

    @abstractmethod
    def integrate(self, connection: Connection) -> None:
        """What the transaction does for the log once its units ran, before the COMMIT."""

    @abstractmethod
    def commit_statements(self) -> list[str]:
        """What commits the transaction (sent in one round trip)."""

    @abstractmethod
    def announce(self) -> None:
        """What follows a durable COMMIT, once the callers who can be are answered."""

    def begin(self, connection: Connection, *, begun: bool = False) -> None:
        """Begin the transaction (unless ``begun``: the caller did), read the log's current key,
        and open the first unit's savepoint: one round trip on PostgreSQL."""
        beginning = [] if begun else [self.backend.begin_sql]
        self.key_rows = self.backend.run_together(
            connection, [*beginning, CURRENT_KEY_SQL, "SAVEPOINT unit"]
        )

    def run(self, connection: Connection) -> None:
        """The units, each in its savepoint, and what the backend does for the log; or, if this
        process lacks the log's current key, a refusal of all of them."""
        store = self.store
        # A unit whose caller stopped waiting, or was answered early, before now is not run.
        self.batch = [item for item in self.batch if store.waiters.dequeue(item.future)]
        if not self.batch:
            self.backend.run(connection, "ROLLBACK")
            return
        try:
            store.signer_for(str(self.key_rows[0][0]) if self.key_rows else None)
        except KeyNotCurrent as refused:
            self.backend.run(connection, "ROLLBACK")
            self.replies = [Reply(item.future, None, refused) for item in self.batch]
            self.batch = []
            return
        time = utc_now()
        recent = store.waiters.recent
        for item in self.batch:
            self._run_unit(connection, item, time, recent)
        self.integrate(connection)
        for waiting in self.waiting:
            store.waiters.add(waiting)

    def _run_unit(
        self, connection: Connection, item: QueuedUnit[Any], time: str, recent: dict[int, int]
    ) -> None:
        """Run one unit in the open savepoint ``unit``, and note its reply, or what it waits
        for; nothing it wrote is kept if it raised. It leaves an empty savepoint ``unit`` open
        for the next unit: released and opened again in one round trip after a success, and
        still open after ROLLBACK TO (which keeps the savepoint)."""
        backend = self.backend
        for attempt in range(CONFLICT_RETRIES + 1):
            transaction = Transaction(backend, connection, time, recent)
            try:
                value = item.work(transaction)
                # Its queued writes, then the next unit's savepoint: one round trip.
                transaction.flush(then=["RELEASE SAVEPOINT unit", "SAVEPOINT unit"])
            except Exception as failure:
                backend.run(connection, "ROLLBACK TO SAVEPOINT unit")
                if attempt < CONFLICT_RETRIES and backend.is_conflict(failure):
                    continue
                self.replies.append(Reply(item.future, None, failure))
                return
            entries = [*transaction.appended, *transaction.awaited]
            if entries:
                self.waiting.append(Waiting(item.future, value, entries))
            else:
                self.replies.append(Reply(item.future, value, None))
            return

    def commit(self, connection: Connection) -> None:
        """COMMIT (which releases the last, empty, savepoint), unless the batch was refused."""
        if self.batch:
            self.committing = perf_counter()
            self.backend.run_together(connection, self.commit_statements())

    def finish(self) -> None:
        """Answer who can be answered now, then what follows the COMMIT."""
        deliver(self.replies)
        self.announce()

    def fail(self, connection: Connection | None, error: Exception) -> None:
        """Nothing of the batch was committed: every caller is refused, retryably."""
        # The server reports it, once per outage; a traceback here would repeat per batch.
        log.warning("store step batch failed; nothing in it was committed: %s", error)
        for waiting in self.waiting:
            self.store.waiters.discard(waiting)
        if connection is not None:
            self.backend.rollback_quietly(connection)
            self.backend.close_quietly(connection)
        failure = StoreUnavailable(f"the database refused the write: {error}")
        deliver([Reply(item.future, None, failure) for item in self.batch])
