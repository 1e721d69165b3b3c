"""An elected sequencer, PostgreSQL's coordination: step writer threads commit units to the
outbox, and one process per log, elected among all that share it, integrates the outbox.

A step transaction locks only the rows it changes, so steps of different rounds run side by
side, in this process (a few writer threads, each with its own connection) and in others. The
log's sequencer (:class:`~gnau_service.store.sequencer.Sequencer`, one per process, of which one
leads) is woken by this process's steps directly, and by other processes' steps through the
notice each sends after its COMMIT; the callers are answered as
:mod:`~gnau_service.store.waiting` describes.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Final, Generic

from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection
from gnau_service.store.coordination import Coordination, QueuedUnit, WritingStore
from gnau_service.store.errors import StoreUnavailable
from gnau_service.store.lease import LogProgress
from gnau_service.store.sequencer import Election, Sequencer, SessionT
from gnau_service.store.steps import MAX_BATCH, StepBatch
from gnau_service.store.waiting import Reply, deliver

#: Step writer threads (and connections) per process.
STEP_WRITERS: Final = 2

_STOP: Final = object()

log = logging.getLogger(__name__)


class SequencedBatch(StepBatch, Generic[SessionT]):
    """A step transaction whose events the elected sequencer integrates."""

    def __init__(
        self, coordination: ElectedSequencer[SessionT], batch: list[QueuedUnit[Any]]
    ) -> None:
        super().__init__(coordination.backend, coordination.store, batch)
        self.sequencer = coordination.sequencer
        self.election = coordination.election

    def integrate(self, connection: Connection) -> None:
        pass  # the sequencer does, once the COMMIT has made the events visible to it

    def commit_statements(self) -> list[str]:
        # The notice after the COMMIT, in a transaction of its own: NOTIFY in the step's
        # transaction would make every step's commit take PostgreSQL's one notification queue
        # lock. Should the notice fail where the COMMIT did not (a lost connection), the callers
        # are refused though their steps committed: a retry of the same request gets its
        # answer, and the sequencer's sweep integrates the events.
        if self.waiting and not self.sequencer.leading:
            return ["COMMIT", self.election.steps_notice_sql]
        return ["COMMIT"]

    def announce(self) -> None:
        if self.waiting:
            self.sequencer.wake()


class ElectedSequencer(Coordination, Generic[SessionT]):
    """PostgreSQL's coordination: :data:`STEP_WRITERS` step writer threads, and this process's
    candidate for the log's sequencer."""

    def __init__(self, backend: Backend, election: Election[SessionT], store: WritingStore) -> None:
        self.backend = backend
        self.election = election
        self.store = store
        self._queue: queue.Queue[QueuedUnit[Any] | object] = queue.Queue()
        self._writers = [
            threading.Thread(target=self._write_loop, name=f"gnau-store-step-{n}", daemon=True)
            for n in range(STEP_WRITERS)
        ]
        for writer in self._writers:
            writer.start()
        self.sequencer = Sequencer(backend, election, store)

    def enqueue(self, unit: QueuedUnit[Any]) -> None:
        self._queue.put(unit)

    @property
    def progress(self) -> LogProgress | None:
        return self.sequencer.progress

    @property
    def leading(self) -> bool:
        return self.sequencer.leading

    def close(self) -> None:
        for _ in self._writers:
            self._queue.put(_STOP)
        for writer in self._writers:
            writer.join()
        self.sequencer.close()

    def _write_loop(self) -> None:
        connection = None
        while True:
            first = self._queue.get()
            if first is _STOP:
                break
            batch: list[QueuedUnit[Any]] = [first]  # type: ignore[list-item]
            while len(batch) < MAX_BATCH:
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
            connection = self._commit(connection, SequencedBatch(self, batch))
        if connection is not None:
            self.backend.close_quietly(connection)

    def _connect_or_fail(self, batch: list[QueuedUnit[Any]]) -> SessionT | None:
        try:
            return self.election.connect_step_writer()
        except Exception as error:
            log.warning("store writer cannot connect: %s", error)
            failure = StoreUnavailable(f"the database is unavailable: {error}")
            deliver([Reply(item.future, None, failure) for item in batch])
            return None

    def _commit(self, connection: SessionT, steps: SequencedBatch[SessionT]) -> SessionT | None:
        """Run one step transaction on this thread; the connection to carry on with, or None if
        it should be replaced."""
        try:
            steps.begin(connection)
            steps.run(connection)
            steps.commit(connection)
        except Exception as error:
            steps.fail(connection, error)
            return None
        steps.finish()
        return connection
