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
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable
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
    """A caller and what it waits for: its queued unit's future, the value to answer with, and
    the events not integrated yet."""

    future: asyncio.Future[Any]
    value: Any
    entries: list[PendingEntry]
    missing: set[int] = field(default_factory=set)
    since: float = field(default_factory=monotonic)


class Reply(NamedTuple):
    """A caller's answer: its future, and the value it gets or what it raised."""

    future: asyncio.Future[Any]
    value: Any
    failure: BaseException | None


#: Integrated events whose indices a process remembers (see :attr:`Waiters.recent`).
RECENT_INDICES: Final = 65_536


class Waiters:
    """The callers of this process whose events are not integrated yet, by pending id; and the
    indices of the events integrated lately (:attr:`recent`), so that a round's next step
    usually finds its previous event's index without asking the database."""

    def __init__(self, expire_after: float) -> None:
        #: The longest a caller waits for its committed events to be integrated (seconds).
        self.expire_after = expire_after
        self._lock = threading.Lock()
        self._by_id: dict[int, list[Waiting]] = {}
        #: Pending id to log index, of events integrated lately (the newest RECENT_INDICES at
        #: least; cleared when full). An index never changes, so this cannot go stale.
        self.recent: dict[int, int] = {}

    def add(self, waiting: Waiting) -> None:
        waiting.missing = {entry.id for entry in waiting.entries if entry.index < 0}
        with self._lock:
            for pending_id in waiting.missing:
                self._by_id.setdefault(pending_id, []).append(waiting)

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
                        done.append(Reply(waiting.future, waiting.value, None))
        return done

    def oldest(self) -> float:
        """How long the longest-waiting caller here has waited (seconds; 0 if none waits)."""
        with self._lock:
            since = min((w.since for ws in self._by_id.values() for w in ws), default=None)
        return 0.0 if since is None else monotonic() - since

    def expire(self, failure: StoreUnavailable | None = None) -> list[Reply]:
        """Refuse the callers that waited longer than :attr:`expire_after` (every caller, with
        ``failure``, if it is given)."""
        limit = monotonic() - self.expire_after if failure is None else float("inf")
        with self._lock:
            old = {id(w): w for ws in self._by_id.values() for w in ws if w.since < limit}
            for waiting in old.values():
                self._forget(waiting)
        if failure is None:
            failure = LogStalled(self.expire_after)
        return [Reply(w.future, None, failure) for w in old.values()]

    def _forget(self, waiting: Waiting) -> None:
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
