"""Waiting callers: answered exactly when every event they wait for is integrated, whatever the
order and grouping in which integrations are heard; refused when they wait too long; and, with a
deadline, refused at their answer time if the log has not moved for long enough meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from gnau_service.store.errors import LogStalled
from gnau_service.store.waiting import (
    STALL_EVIDENCE_SECONDS,
    PendingEntry,
    Reply,
    Waiters,
    Waiting,
    deliver,
)


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


#: Callers, each waiting for a few of the pending ids 1..40 (some ids shared by several).
CALLERS = st.lists(st.sets(st.integers(1, 40), min_size=1, max_size=4), min_size=1, max_size=12)


def answer(loop: asyncio.AbstractEventLoop, replies: list[Reply]) -> None:
    """Deliver ``replies`` to their callers, on their (not running) loop, and let it settle
    them."""
    deliver(replies)
    loop.run_until_complete(asyncio.sleep(0))


@given(callers=CALLERS, data=st.data())
def test_each_caller_is_answered_once_all_its_events_are_integrated(
    callers: list[set[int]], data: st.DataObject
) -> None:
    loop = asyncio.new_event_loop()
    waiters = Waiters(expire_after=30.0)
    waiting = []
    for number, ids in enumerate(callers):
        entries = [PendingEntry(pending_id) for pending_id in sorted(ids)]
        each = Waiting(loop.create_future(), f"answer {number}", entries)
        waiters.add(each)
        waiting.append(each)
    every_id = sorted(set().union(*callers))
    index_of = {pending_id: 100 + position for position, pending_id in enumerate(every_id)}
    # Integrations heard in any order, in batches of any size (an id may be heard twice: the
    # sequencer's own map, then a query after the NOTIFY).
    heard = data.draw(st.permutations(every_id))
    repeats = data.draw(st.lists(st.sampled_from(every_id), max_size=5))
    cuts = sorted(data.draw(st.sets(st.integers(0, len(heard)), max_size=4)))
    batches = [heard[a:b] for a, b in zip([0, *cuts], [*cuts, len(heard)], strict=True)]
    batches.append(repeats)
    resolved: set[int] = set()
    for batch in batches:
        answer(loop, waiters.resolve({pending_id: index_of[pending_id] for pending_id in batch}))
        resolved.update(batch)
        for ids, each in zip(callers, waiting, strict=True):
            assert each.future.done() == (ids <= resolved)
    for number, each in enumerate(waiting):
        assert each.future.result() == f"answer {number}"
        assert [entry.index for entry in each.entries] == [index_of[e.id] for e in each.entries]
    assert waiters.awaited() == []
    assert all(waiters.recent[pending_id] == index_of[pending_id] for pending_id in every_id)
    loop.close()


def test_a_caller_that_waited_too_long_is_refused_and_forgotten() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    old = Waiting(loop.create_future(), "late", [PendingEntry(1), PendingEntry(2)])
    fresh = Waiting(loop.create_future(), "on time", [PendingEntry(2)])
    waiters.add(old)
    clock.now += 6.0
    waiters.add(fresh)
    clock.now += 0.6
    answer(loop, waiters.expire())
    assert isinstance(old.future.exception(), LogStalled)
    assert "within 6.5 s" in str(old.future.exception())
    assert "a retry of the same request gets its answer" in str(old.future.exception())
    assert not fresh.future.done() and waiters.awaited() == [2]
    answer(loop, waiters.resolve({1: 7, 2: 8}))
    assert fresh.future.result() == "on time"
    loop.close()


# -- answered before the deadline ------------------------------------------------------------------

#: Just short of the evidence a refusal needs, and just past it (seconds).
SHORT = STALL_EVIDENCE_SECONDS - 0.01
ENOUGH = STALL_EVIDENCE_SECONDS + 0.01


def refusal(future: asyncio.Future[Any]) -> LogStalled:
    failure = future.exception()
    assert isinstance(failure, LogStalled), failure
    return failure


def test_a_committed_caller_on_a_log_that_does_not_move_is_refused_at_its_answer_time() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    caller = Waiting(loop.create_future(), "answer", [PendingEntry(1)])
    waiters.add(caller)
    clock.now += SHORT
    waiters.answer_early(caller.future)
    assert not caller.future.done()  # not yet evidence of a stall
    clock.now += 0.02
    waiters.answer_early(caller.future)
    failure = refusal(caller.future)
    assert failure.ran
    assert "has not moved for 1.5 s" in str(failure)
    assert "it is committed, and a retry of the same request gets its answer" in str(failure)
    # Forgotten: no longer awaited, and its integration, when it comes, answers nobody.
    assert waiters.awaited() == []
    assert waiters.resolve({1: 5}) == []
    loop.close()


def test_a_caller_on_a_moving_log_is_left_to_its_deadline() -> None:
    """Load, not a stall: the log moved while the caller waited, so only the time since the log
    last moved counts, never the caller's whole wait."""
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    caller = Waiting(loop.create_future(), "answer", [PendingEntry(1)])
    waiters.add(caller)
    clock.now += 1.0
    waiters.moved()  # another caller's events were integrated; not yet this one's
    clock.now += SHORT
    waiters.answer_early(caller.future)
    assert not caller.future.done() and waiters.awaited() == [1]
    clock.now += 0.02  # now the log has stood still for the evidence's length
    waiters.answer_early(caller.future)
    assert refusal(caller.future).ran
    loop.close()


def test_a_caller_that_came_after_the_log_last_moved_counts_from_its_own_start() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    waiters.moved()
    clock.now += 60.0  # a quiet log: it has not moved for a minute, and nobody waited
    caller = Waiting(loop.create_future(), "answer", [PendingEntry(1)])
    waiters.add(caller)
    clock.now += SHORT
    waiters.answer_early(caller.future)
    assert not caller.future.done()
    loop.close()


def test_a_queued_unit_is_withdrawn_and_never_starts() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    withdrawn, started = loop.create_future(), loop.create_future()
    waiters.queue(withdrawn)
    waiters.queue(started)
    clock.now += ENOUGH
    waiters.answer_early(withdrawn)
    failure = refusal(withdrawn)
    assert not failure.ran
    assert "it was not run, and a retry of the same request runs it" in str(failure)
    # The writer that reaches the withdrawn unit skips it; the other one starts.
    assert waiters.dequeue(withdrawn) is False
    assert waiters.dequeue(started) is True
    # A unit that has started (neither queued nor awaiting integration) is left alone.
    clock.now += 10.0
    waiters.answer_early(started)
    assert not started.done()
    loop.close()


def test_a_queued_unit_on_a_moving_log_starts() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    queued = loop.create_future()
    waiters.queue(queued)
    clock.now += 1.0
    waiters.moved()
    clock.now += SHORT
    waiters.answer_early(queued)
    assert not queued.done()
    assert waiters.dequeue(queued) is True
    loop.close()


def test_a_cancelled_caller_is_neither_run_nor_refused() -> None:
    loop = asyncio.new_event_loop()
    clock = Clock()
    waiters = Waiters(expire_after=6.5, clock=clock)
    cancelled = loop.create_future()
    waiters.queue(cancelled)
    cancelled.cancel()
    clock.now += ENOUGH
    waiters.answer_early(cancelled)
    assert cancelled.cancelled()
    assert waiters.dequeue(cancelled) is False
    loop.close()


@given(
    moves=st.lists(st.floats(0.0, 10.0), max_size=6),
    queued=st.booleans(),
    answer_at=st.floats(0.0, 10.0),
)
def test_a_caller_is_refused_exactly_when_the_log_stood_still_long_enough(
    moves: list[float], queued: bool, answer_at: float
) -> None:
    """Whatever the moves heard before its answer time: refused iff the log has not moved for
    the evidence's length since the caller began waiting (or since its last move, if later)."""
    loop = asyncio.new_event_loop()
    clock = Clock()
    start = clock.now
    waiters = Waiters(expire_after=6.5, clock=clock)
    future: asyncio.Future[Any] = loop.create_future()
    if queued:
        waiters.queue(future)
    else:
        waiters.add(Waiting(future, "answer", [PendingEntry(1)]))
    for move in sorted(moves):
        if move <= answer_at:
            clock.now = start + move
            waiters.moved()
    clock.now = start + answer_at
    waiters.answer_early(future)
    still = answer_at - max([0.0, *(move for move in moves if move <= answer_at)])
    assume(abs(still - STALL_EVIDENCE_SECONDS) > 1e-6)  # no float rounding at the boundary
    assert future.done() == (still >= STALL_EVIDENCE_SECONDS)
    if future.done():
        assert refusal(future).ran is not queued
        assert waiters.dequeue(future) is False
    loop.close()
