"""How a backend's round steps and its sequencer work together: the one interface between the
store and its backend's strategy.

Every write is a *unit of work* (a round step): a function that receives a
:class:`~gnau_service.store.transaction.Transaction`. :meth:`Store.run_async
<gnau_service.store.store.Store.run_async>` queues it as a :class:`QueuedUnit` with its
backend's :class:`Coordination`, which runs queued units in step transactions
(:mod:`~gnau_service.store.steps`) and gets their events into the log, in one of two ways:

- SQLite, one writer at a time: the event loop runs each batch of units and integrates their
  events in the same transaction, before its one COMMIT (:mod:`~gnau_service.store.in_step`);
- PostgreSQL, several processes: step writer threads commit units to the outbox, and one process
  elected among them sequences the outbox into the log
  (:mod:`~gnau_service.store.step_writers`, :mod:`~gnau_service.store.sequencer`).

Either way the caller is answered once its events are integrated
(:mod:`~gnau_service.store.waiting`), and the store hears of each integration through the
:class:`WritingStore` side it offers its coordination.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from gnau_service.audit.log import AppendedEntry, LogAppender
from gnau_service.audit.signing import LogSigner
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.lease import LogProgress
from gnau_service.store.waiting import Waiters

T = TypeVar("T")


@dataclass(slots=True)
class QueuedUnit(Generic[T]):
    """A unit of work and the future its caller awaits (on the caller's event loop). The unit
    takes a :class:`~gnau_service.store.transaction.Transaction`."""

    work: Callable[[Any], T]
    future: asyncio.Future[T]


@dataclass(frozen=True)
class Integrated:
    """One integration, once committed: the entries it appended, each pending event's new
    index, the head after it and who signed, and how long it took."""

    appended: tuple[AppendedEntry, ...]
    indices: dict[int, int]
    appender: LogAppender
    seconds: float
    commit_seconds: float


class WritingStore(Protocol):
    """The store as its coordination sees it: the callers waiting for integration, the key to
    sign with, and what follows each integration (see :class:`~gnau_service.store.store.Store`)."""

    @property
    def waiters(self) -> Waiters: ...

    def signer_for(self, current_key: str | None) -> LogSigner: ...

    def integrated(self, done: Integrated) -> None: ...

    def notified(self, notices: Sequence[HeadNotice]) -> None: ...

    def check_waiters(self) -> None: ...

    def expire_waiters(self) -> None: ...


class Coordination(ABC):
    """One backend's way of running steps and integrating their events (see above)."""

    @abstractmethod
    def enqueue(self, unit: QueuedUnit[Any]) -> None:
        """Hand ``unit`` to a step writer; its future is answered once its events are
        integrated (or it failed). Called on the unit's event loop."""

    @property
    def progress(self) -> LogProgress | None:
        """The log's progress as the sequencer last read it (None where no election runs)."""
        return None

    @property
    def leading(self) -> bool:
        """Whether this process integrates the log's events now."""
        return True

    @property
    def writers_contend(self) -> bool:
        """Whether another process has lately waited for the one writer this process's step
        transactions are (SQLite shared by ``--workers``): work done inside a step transaction
        then holds up every process's steps."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Finish the queued units and stop, releasing the connections (after integrating what
        this process committed, where a sequencer of this process leads)."""
