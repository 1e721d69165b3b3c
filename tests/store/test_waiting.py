"""Waiting callers: answered exactly when every event they wait for is integrated, whatever the
order and grouping in which integrations are heard; refused when they wait too long."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from gnau_service.store.errors import LogStalled
from gnau_service.store.waiting import PendingEntry, Reply, Waiters, Waiting, deliver

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
    waiters = Waiters(expire_after=6.5)
    old = Waiting(loop.create_future(), "late", [PendingEntry(1), PendingEntry(2)], since=0.0)
    fresh = Waiting(loop.create_future(), "on time", [PendingEntry(2)])
    waiters.add(old)
    waiters.add(fresh)
    answer(loop, waiters.expire())
    assert isinstance(old.future.exception(), LogStalled)
    assert "within 6.5 s" in str(old.future.exception())
    assert "a retry of the same request gets its answer" in str(old.future.exception())
    assert not fresh.future.done() and waiters.awaited() == [2]
    answer(loop, waiters.resolve({1: 7, 2: 8}))
    assert fresh.future.result() == "on time"
    loop.close()
