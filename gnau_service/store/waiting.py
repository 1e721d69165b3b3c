"""Callers waiting for their events to be integrated, and how their answers reach them.

A step's caller is answered only once every event it appended (and every earlier event it
refers to) has a log index and is covered by a signed checkpoint. The step writer registers the
caller here, with its pending events, *before* the step's COMMIT: the sequencer sees the events
only once committed, so it cannot integrate them before the caller is registered. The store
then hears of integrations in two ways, neither a poll:

- its own sequencer's transactions, with each event's index (:meth:`Waiters.resolve`);
- another process's, from the log head's NOTIFY, which carries each event's index when they fit
  in a notice (:mod:`~gnau_service.store.head_notices`); when they do not, one query reads the
  indices of every event still awaited here (the store's
  :meth:`~gnau_service.store.store.Store.check_waiters`).

A caller still waiting after the log's stall bound (:func:`~gnau_service.store.lease.stall_bound`)
is answered :class:`~gnau_service.store.errors.LogStalled`: its step is committed and will be
integrated whenever a sequencer runs again, so a retry with the same request gets the original
answer then.

**A caller with a deadline is answered before it.** At its *answer time*,
:data:`ANSWER_MARGIN_SECONDS` before its deadline, a caller still waiting on the log is refused
:class:`~gnau_service.store.errors.LogStalled` if the log has not moved for
:data:`STALL_EVIDENCE_SECONDS` while it waited (:meth:`Waiters.answer_early`): a stalled log, not
a busy one, which keeps moving. It waits on the log in one of two ways, and either way a retry
with the same request id is safe:

- its step ran and awaits integration here: the step is committed (or committing) and will be
  integrated, so the retry gets the original answer then;
- its unit has not started (:meth:`Waiters.queue`): queued behind a writer that waits for the
  log (SQLite's writers' turn, held by a frozen process until the watchdog kills it). It is
  *withdrawn*: the writer asks :meth:`Waiters.dequeue` before it runs a unit, under the same lock
  as the refusal, so a withdrawn unit never runs, and the retry runs it.

The log *moves* when this process commits an integration or hears that another did
(:meth:`Waiters.moved`: from its own integrations, from the notices of another process's
sequencer, and from the log's tail, which hears of every process's appends on either backend).
A caller whose deadline comes before it has waited that long runs into its deadline as it would
without this rule: nothing tells a stall from a pause that soon. A caller without a deadline,
or with a later one than the stall bound, is answered at the stall bound as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Final, NamedTuple

from gnau_service.audit.entries import EntryKind
from gnau_service.store.errors import LogStalled, StoreUnavailable


@dataclass(eq=False)
class PendingEntry:
    """An event a step committed to the outbox: its pending id, and its log index once the
    sequencer has integrated it (-1 until then; the store fills it in before the caller is
    answered, which is why this one value is not frozen)."""

    id: int
    kind: EntryKind | None = None
    round_id: str | None = None
    index: int = -1


@dataclass(eq=False)
class Waiting:
    """A caller and what it waits for: its queued unit's future, the value to answer with, the
    events not integrated yet, and since when (set by :meth:`Waiters.add`)."""

    future: asyncio.Future[Any]
    value: object
    entries: list[PendingEntry]
    missing: set[int] = field(default_factory=set)
    since: float = 0.0


class Reply(NamedTuple):
    """A caller's answer: its future, and the value it gets or what it raised."""

    future: asyncio.Future[Any]
    value: object
    failure: BaseException | None


#: Integrated events whose indices a process remembers (see :attr:`Waiters.recent`).
RECENT_INDICES: Final = 65_536
#: A caller with a deadline still waiting on a stalled log is answered this long before its
#: deadline: time for the refusal to get through an event loop busy with a step batch (SQLite runs
#: a batch of units on the loop between two callbacks) and through grpc to the client, whose own
#: deadline began earlier than the server's by the request's transit.
ANSWER_MARGIN_SECONDS: Final = 0.5
#: ...if the log has not moved for this long while it waited. A working sequencer integrates a
#: committed event within a sweep (:data:`~gnau_service.store.sequencer.SWEEP_SECONDS`), even one
#: whose notice was lost, and half a second more covers the integration itself on a busy machine;
#: under load the log keeps moving.
STALL_EVIDENCE_SECONDS: Final = 1.5


class Waiters:
    """The callers of this process whose events are not integrated yet, by pending id; and the
    indices of the events integrated lately (:attr:`recent`), so that a round's next step
    usually finds its previous event's index without asking the database."""

    def __init__(self, expire_after: float, clock: Callable[[], float] = monotonic) -> None:
        #: The longest a caller waits for its committed events to be integrated (seconds).
        self.expire_after = expire_after
        self._clock = clock
        self._lock = threading.Lock()
        self._by_id: dict[int, list[Waiting]] = {}
        self._by_future: dict[asyncio.Future[Any], Waiting] = {}
        #: The callers with a deadline whose units have not started, and since when.
        self._queued: dict[asyncio.Future[Any], float] = {}
        #: When the log last moved, as this process heard (see the module's text).
        self._moved_at = -math.inf
        #: Pending id to log index, of events integrated lately (the newest RECENT_INDICES at
        #: least; cleared when full). An index never changes, so this cannot go stale.
        self.recent: dict[int, int] = {}

    def add(self, waiting: Waiting) -> None:
        waiting.missing = {entry.id for entry in waiting.entries if entry.index < 0}
        waiting.since = self._clock()
        with self._lock:
            self._by_future[waiting.future] = waiting
            for pending_id in waiting.missing:
                self._by_id.setdefault(pending_id, []).append(waiting)

    def queue(self, future: asyncio.Future[Any]) -> None:
        """A caller with a deadline, whose unit is queued: it may be withdrawn until it starts."""
        with self._lock:
            self._queued[future] = self._clock()

    def dequeue(self, future: asyncio.Future[Any]) -> bool:
        """Whether a queued unit may start now: not if its caller was answered early (withdrawn)
        or stopped waiting. Either way its caller can no longer be withdrawn."""
        with self._lock:
            self._queued.pop(future, None)
            return not future.done()

    @property
    def moved_at(self) -> float:
        """When the log last moved, as this process heard (its clock; -inf if never)."""
        return self._moved_at

    def moved(self) -> None:
        """The log moved: this process committed an integration, or heard that another did."""
        now = self._clock()
        with self._lock:
            self._moved_at = now

    def answer_early(self, future: asyncio.Future[Any]) -> None:
        """At a caller's answer time (see the module's text): refuse it with LogStalled if it
        still waits, queued or for integration, on a log that has not moved for
        :data:`STALL_EVIDENCE_SECONDS` meanwhile, and forget it. Call it on the caller's event
        loop. A caller whose unit is running now (neither queued nor waiting here) is left to its
        deadline."""
        now = self._clock()
        with self._lock:
            queued = self._queued.get(future)
            waiting = self._by_future.get(future)
            since = queued if waiting is None else waiting.since
            if future.done() or since is None:
                return
            still = now - max(since, self._moved_at)
            if still < STALL_EVIDENCE_SECONDS:
                return
            if waiting is None:
                del self._queued[future]
            else:
                self._forget(waiting)
            # Under the lock: a writer's dequeue sees the caller answered, and skips its unit.
            future.set_exception(
                LogStalled(
                    f"the log has not moved for {still:.1f} s and the call's deadline is near",
                    ran=waiting is not None,
                )
            )

    def discard(self, waiting: Waiting) -> None:
        with self._lock:
            self._forget(waiting)

    def awaited(self) -> list[int]:
        """The pending ids someone here still waits for."""
        with self._lock:
            return list(self._by_id)

    def resolve(self, indices: dict[int, int]) -> list[Reply]:
        """Give events their indices; the answers of the callers that now have all of theirs."""
        done: list[Reply] = []
        with self._lock:
            if len(self.recent) + len(indices) > RECENT_INDICES:
                self.recent = {}
            self.recent.update(indices)
            for pending_id, index in indices.items():
                for waiting in self._by_id.pop(pending_id, ()):
                    for entry in waiting.entries:
                        if entry.id == pending_id:
                            entry.index = index
                    waiting.missing.discard(pending_id)
                    if not waiting.missing:
                        del self._by_future[waiting.future]
                        done.append(Reply(waiting.future, waiting.value, None))
        return done

    def oldest(self) -> float:
        """How long the longest-waiting caller here has waited (seconds; 0 if none waits)."""
        with self._lock:
            since = min((w.since for ws in self._by_id.values() for w in ws), default=None)
        return 0.0 if since is None else self._clock() - since

    def expire(self, failure: StoreUnavailable | None = None) -> list[Reply]:
        """Refuse the callers that waited longer than :attr:`expire_after` (every caller, with
        ``failure``, if it is given)."""
        limit = self._clock() - self.expire_after if failure is None else math.inf
        with self._lock:
            old = {id(w): w for ws in self._by_id.values() for w in ws if w.since < limit}
            for waiting in old.values():
                self._forget(waiting)
        if failure is None:
            failure = LogStalled(
                f"the log's sequencer did not integrate the change within {self.expire_after:.1f} s"
            )
        return [Reply(w.future, None, failure) for w in old.values()]

    def _forget(self, waiting: Waiting) -> None:
        self._by_future.pop(waiting.future, None)
        for pending_id in waiting.missing:
            waiters = self._by_id.get(pending_id)
            if waiters is not None:
                with contextlib.suppress(ValueError):
                    waiters.remove(waiting)
                if not waiters:
                    del self._by_id[pending_id]


def deliver(replies: Iterable[Reply]) -> None:
    """Answer every caller, with one wake-up of each event loop for all of its callers (the
    callers are on event loops; the step writers and the sequencer may not be)."""
    per_loop: dict[asyncio.AbstractEventLoop, list[Reply]] = {}
    for reply in replies:
        per_loop.setdefault(reply.future.get_loop(), []).append(reply)
    for loop, waiting in per_loop.items():
        # A closed loop has nobody left waiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, waiting)


def _settle_all(replies: list[Reply]) -> None:
    for future, value, failure in replies:
        # Its caller may have stopped waiting (a cancelled call) meanwhile.
        with contextlib.suppress(asyncio.InvalidStateError):
            if failure is None:
                future.set_result(value)
            else:
                future.set_exception(failure)
