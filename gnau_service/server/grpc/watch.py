"""Following the log as it grows: what a WatchEntries stream sends, and when.

A stream sends what the log already holds, a page at a time, then waits on the log's tail
(an asyncio event: no thread, no poll) for more. It sends at most one message per
:data:`~gnau_service.rounds.limits.WATCH_INTERVAL_SECONDS` once caught up, with every entry
appended meanwhile, so that hundreds of streams cost the dealer little however often the log
grows. Each stream keeps its own place in that interval (streams opened one after another take
successive places), so that a commit does not wake every stream at the same moment: hundreds
of writes at once would hold up the dealer's calls behind them.

A client that does not read holds its stream at its current write: HTTP/2 flow control stops
it, so nothing queues in memory for it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Final

from gnau_service.rounds.limits import ENTRIES_PER_MESSAGE, WATCH_INTERVAL_SECONDS
from gnau_service.store import LogTail

#: Places in the interval that successive streams take, round robin.
PLACES: Final = 32
_next_place = itertools.count()


async def follow(
    tail: LogTail, start: int, *, interval: float = WATCH_INTERVAL_SECONDS
) -> AsyncIterator[tuple[int, list[bytes]]]:
    """Pages ``(first index, entries)`` of the log from entry ``start`` on, for ever."""
    next_index = start
    send_at = time.monotonic() + interval * (next(_next_place) % PLACES) / PLACES
    while True:
        size = await tail.wait_beyond(next_index)
        wait = send_at - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
            size = tail.size
        while next_index < size:
            stop = min(next_index + ENTRIES_PER_MESSAGE, size)
            page = await tail.read(next_index, stop)
            if not page:  # nothing there after all (a store restored from a backup?)
                break
            yield next_index, page
            next_index += len(page)
        send_at = time.monotonic() + interval
