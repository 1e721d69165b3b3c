"""The tail of the log, for waiters on an event loop: its size as this process knows it, and its
newest entries.

Waiters await an asyncio event, never a thread: a thread per waiter would hold one of the loop's
few executor threads, and every other ``asyncio.to_thread`` caller would queue behind them. The
size is learnt three ways:

- this process's own commits, at once, with their entries (:meth:`Store.listen`), which the tail
  keeps, up to a budget, so that readers of the newest entries need no database read;
- other processes' commits, at once, where the database can say so (PostgreSQL's
  ``LISTEN``/``NOTIFY``: :meth:`Backend.watch_sizes`);
- a slow poll of the size, one read a second whoever waits, for the rest (several processes on
  one SQLite file, a notification connection being re-established).

Entries the tail does not hold are read from the database on a thread, a few reads at a time
whatever the number of readers, and one read for every reader of the same range.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Final

from gnau_service.store.errors import StoreUnavailable
from gnau_service.store.store import Store

POLL_SECONDS: Final = 1.0
#: Bytes of the newest entries kept in memory (about 8,000 entries of a round).
CACHE_BYTES: Final = 8 * 1024 * 1024
#: Database reads of entries at once, whatever the number of readers.
MAX_CONCURRENT_READS: Final = 2
#: Seconds to wait before listening again after the notification connection failed.
RELISTEN_SECONDS: Final = 1.0

log = logging.getLogger(__name__)


class LogTail:
    """The log's size and newest entries, kept current for waiters on one event loop.

    Start it (:meth:`start`) on the loop whose tasks will wait; stop it before the store closes.
    """

    def __init__(
        self,
        store: Store,
        *,
        poll_seconds: float = POLL_SECONDS,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self._store = store
        self._poll_seconds = poll_seconds
        self._cache_bytes = cache_bytes
        self._size = 0
        self._grown = asyncio.Event()
        # The newest entries: _entries[i] is entry _first + i.
        self._first = 0
        self._entries: deque[bytes] = deque()
        self._entry_bytes = 0
        self._reads = asyncio.Semaphore(MAX_CONCURRENT_READS)
        self._reading: dict[tuple[int, int], asyncio.Future[list[bytes]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def size(self) -> int:
        """The log's size as last learnt."""
        return self._size

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._store.listen(self._committed)
        self._learn(await asyncio.to_thread(self._store.size))
        self._tasks = [
            asyncio.create_task(self._poll(), name="gnau-log-tail-poll"),
            asyncio.create_task(self._listen(), name="gnau-log-tail-listen"),
        ]

    async def stop(self) -> None:
        self._loop = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def wait_beyond(self, index: int) -> int:
        """Wait until the log holds entry ``index``; return its size then."""
        while self._size <= index:
            await self._grown.wait()
        return self._size

    async def read(self, start: int, stop: int) -> list[bytes]:
        """Entries ``start <= index < stop`` (all of them committed): from memory if held, else
        from the database (StoreUnavailable if it cannot be read)."""
        if self._first <= start and stop <= self._first + len(self._entries):
            offset = start - self._first
            return [self._entries[offset + i] for i in range(stop - start)]
        key = (start, stop)
        pending = self._reading.get(key)
        if pending is None:
            pending = self._reading[key] = asyncio.ensure_future(self._read_stored(start, stop))
            pending.add_done_callback(lambda _: self._reading.pop(key, None))
        return await asyncio.shield(pending)

    async def _read_stored(self, start: int, stop: int) -> list[bytes]:
        async with self._reads:
            entries = await asyncio.to_thread(self._store.entries, start, stop)
        self._keep(start, entries)
        return entries

    # -- learning --------------------------------------------------------------------------------

    def _committed(self, first: int, entries: list[bytes]) -> None:
        # Called on the committing thread (the store's writer, or this loop's own commit).
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(self._published, first, entries)

    def _published(self, first: int, entries: list[bytes]) -> None:
        self._keep(first, entries)
        self._learn(first + len(entries))

    def _learn(self, size: int) -> None:
        if size > self._size:
            self._size = size
            # Another process's appends count as the log moving for this one's waiting callers
            # (SQLite's workers hear of each other only here).
            self._store.waiters.moved()
            grown, self._grown = self._grown, asyncio.Event()
            grown.set()

    def _keep(self, first: int, entries: list[bytes]) -> None:
        """Hold ``entries`` (from index ``first``) if they extend the held ones; if they leave a
        gap, hold them instead; drop the oldest over the budget."""
        end = self._first + len(self._entries)
        if not entries or first + len(entries) <= end:
            return
        if first > end or not self._entries:
            self._first, self._entries, self._entry_bytes = first, deque(), 0
            end = first
        for data in entries[end - first :]:
            self._entries.append(data)
            self._entry_bytes += len(data)
        while self._entry_bytes > self._cache_bytes and len(self._entries) > 1:
            self._entry_bytes -= len(self._entries.popleft())
            self._first += 1

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._poll_seconds)
            # The store's failures are reported where calls are answered.
            with contextlib.suppress(StoreUnavailable):
                self._learn(await asyncio.to_thread(self._store.size))

    async def _listen(self) -> None:
        backend = self._store.backend
        failing = False
        while True:
            try:
                async for size in backend.watch_sizes():
                    if failing:
                        log.warning("log size notifications are back")
                        failing = False
                    self._learn(size)
                return  # the database cannot notify: the poll does it all
            except Exception as error:
                if not failing:  # once per outage; the poll covers the gap meanwhile
                    log.warning("log size notifications stopped (%s); listening again", error)
                    failing = True
            await asyncio.sleep(RELISTEN_SECONDS)
