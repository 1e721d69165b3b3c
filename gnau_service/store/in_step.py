"""In-step integration, SQLite's coordination: the event loop runs each batch of units and
integrates their events in the same transaction, before its one COMMIT (one fsync for both).

SQLite has one writer at a time, so nothing is gained by a sequencer apart from the steps: the
step transaction takes the write lock (``BEGIN IMMEDIATE``), runs its units, then runs the
sequencer's protocol (:func:`~gnau_service.store.sequencer.integrate`) on the outbox rows it has
just written. Even a second process on the same file appends after, never beside, this one.

Units queue while a batch commits; the next batch takes them all. The loop runs the units and
the integration itself; what may block runs on a thread of its own: COMMIT and its fsync, and
taking the write lock while another connection holds it (the loop takes it itself when it is
free, as it nearly always is in one process).

Where several processes share the file (``gnau serve --workers N``), each batch first takes the
backend's *writer turn* (:class:`WriterTurn`: SQLite's is a ``flock`` on a file beside the
database), and lets it go on the commit thread the moment its COMMIT returns. SQLite's own lock
is what keeps the log correct; the turn only hands it over promptly: a process waiting for
SQLite's lock polls it, sleeping 1, 2, 5, 10 ms and longer between tries, and so kept losing it
to a process that commits batch after batch, while one blocked on the turn is woken by the
kernel as soon as it is free. A batch that finds the turn held says so
(:attr:`InStepIntegration.writers_contend`, for :data:`CONTENTION_SECONDS`): the dealer then
computes each step before it queues it (:mod:`~gnau_service.rounds.planning`), so that the turn
is held for writing, not computing. A writer thread would give up the GIL at every SQLite statement
and wait for the busy loop to hand it back, which costs more than the statements; and the loop
hands a thread its BEGIN only to wait for it to get the GIL back (up to the interpreter's switch
interval a batch under load), so it does not when it need not.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from time import monotonic, perf_counter
from typing import Any, Final, Protocol, TypeVar, TypeVarTuple

from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection
from gnau_service.store.coordination import Coordination, Integrated, QueuedUnit, WritingStore
from gnau_service.store.sequencer import SEQUENCE_BATCH, Integration, integrate
from gnau_service.store.steps import MAX_BATCH, StepBatch

T = TypeVar("T")
Arguments = TypeVarTuple("Arguments")

#: How long after a batch last found another process holding the writers' turn this process
#: says its writers contend (:attr:`InStepIntegration.writers_contend`).
CONTENTION_SECONDS: Final = 10.0

#: Begins a step transaction on a connection if that needs no waiting (the write lock is free
#: now); whether it began.
BeginAtOnce = Callable[[Connection], bool]


class WriterTurn(Protocol):
    """Whose turn it is to write, among the processes sharing a database (see above)."""

    def take_at_once(self) -> bool:
        """Take the turn if it is free now; whether it was taken."""
        ...

    def take(self) -> None:
        """Wait for the turn and take it (blocks: call it on a thread)."""
        ...

    def release(self) -> None:
        """Let the turn go (harmless if not held)."""
        ...

    def close(self) -> None:
        """Let the turn go for good."""
        ...


class InStepBatch(StepBatch):
    """A step transaction that integrates its own events before it commits."""

    def __init__(self, backend: Backend, store: WritingStore, batch: list[QueuedUnit[Any]]):
        super().__init__(backend, store, batch)
        self.integrations: list[Integration] = []

    def integrate(self, connection: Connection) -> None:
        integrations = self.integrations
        while not integrations or len(integrations[-1].indices) == SEQUENCE_BATCH:
            integrations.append(integrate(self.backend, connection, self.store.signer_for))

    def commit_statements(self) -> list[str]:
        return ["COMMIT"]

    def announce(self) -> None:
        now = perf_counter()
        seconds, commit_seconds = now - self.started, now - self.committing
        for appended, indices, appender in self.integrations:
            self.store.integrated(
                Integrated(tuple(appended), indices, appender, seconds, commit_seconds)
            )


class InStepIntegration(Coordination):
    """SQLite's coordination: the steps of each event loop, on one connection (a loop that is
    not the last one's gets a writer of its own; the server has one loop)."""

    def __init__(
        self,
        backend: Backend,
        store: WritingStore,
        begin_at_once: BeginAtOnce,
        turn: WriterTurn | None = None,
    ):
        self._backend = backend
        self._store = store
        self._begin_at_once = begin_at_once
        self._turn = turn
        self._loop_steps: LoopSteps | None = None
        self._contended_at = -CONTENTION_SECONDS

    @property
    def writers_contend(self) -> bool:
        return monotonic() - self._contended_at < CONTENTION_SECONDS

    def _contended(self) -> None:
        self._contended_at = monotonic()

    def enqueue(self, unit: QueuedUnit[Any]) -> None:
        loop = unit.future.get_loop()
        if self._loop_steps is None or self._loop_steps.loop is not loop:
            if self._loop_steps is not None:
                self._loop_steps.close()
            self._loop_steps = LoopSteps(
                self._backend,
                self._store,
                self._begin_at_once,
                loop,
                self._turn,
                contended=self._contended,
            )
        self._loop_steps.add(unit)

    def close(self) -> None:
        if self._loop_steps is not None:
            self._loop_steps.close()
        if self._turn is not None:
            self._turn.close()


class LoopSteps:
    """The step transactions of one event loop, on one connection (see the module's text)."""

    def __init__(
        self,
        backend: Backend,
        store: WritingStore,
        begin_at_once: BeginAtOnce,
        loop: asyncio.AbstractEventLoop,
        turn: WriterTurn | None = None,
        *,
        contended: Callable[[], None] = lambda: None,
    ) -> None:
        self._backend = backend
        self._turn = turn
        self._contended = contended
        self._store = store
        self._begin_at_once = begin_at_once
        self.loop = loop
        self._pending: list[QueuedUnit[Any]] = []
        self._draining: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one
        self._closing = False
        self._connection: Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="gnau-store-commit")

    def close(self) -> None:
        """Let the connection go: now if idle, else when the batch in hand ends."""
        self._closing = True
        if self._draining is None:
            self._release()

    def _release(self) -> None:
        # Closed on the commit thread, after what it is running: a drain cancelled with its
        # loop leaves a statement of the connection in flight there, and closing a connection
        # under a running statement crashes the process (sqlite3 frees what the statement uses).
        connection, self._connection = self._connection, None
        if connection is not None:
            self._thread.submit(self._backend.close_quietly, connection)
        self._thread.shutdown(wait=False)

    async def _blocking(self, function: Callable[[*Arguments], T], *args: *Arguments) -> T:
        return await self.loop.run_in_executor(self._thread, functools.partial(function, *args))

    def add(self, unit: QueuedUnit[Any]) -> None:
        self._pending.append(unit)
        if self._draining is None:
            self._draining = self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                # A caller that stopped waiting before its unit started (a cancelled call) gets
                # nothing done; a retry with the same request runs it then.
                await self._commit([unit for unit in batch if not unit.future.done()])
        finally:
            self._draining = None
            if self._closing:
                self._release()

    async def _commit(self, batch: list[QueuedUnit[Any]]) -> None:
        if not batch:
            return
        steps = InStepBatch(self._backend, self._store, batch)
        turn = self._turn
        try:
            if turn is not None and not turn.take_at_once():
                self._contended()  # another process holds the turn
                await self._blocking(turn.take)
            if self._connection is None:
                self._connection = await self._blocking(self._backend.connect)
            if self._begin_at_once(self._connection):
                steps.begin(self._connection, begun=True)
            else:
                await self._blocking(steps.begin, self._connection)
            steps.run(self._connection)
            await self._blocking(self._commit_in_turn, steps, self._connection)
        except Exception as error:
            steps.fail(self._connection, error)
            self._connection = None
            return
        finally:
            if turn is not None:
                turn.release()
        steps.finish()

    def _commit_in_turn(self, steps: InStepBatch, connection: Connection) -> None:
        """COMMIT, then at once hand the turn to a process waiting for it."""
        try:
            steps.commit(connection)
        finally:
            if self._turn is not None:
                self._turn.release()
