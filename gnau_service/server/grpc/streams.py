"""Server-streaming calls: how many may be open, and their end when the server stops.

Every open stream holds a slot; a peer over its share, or the server over its total, is
refused with RESOURCE_EXHAUSTED before the stream starts, so no client can take every call the
server allows (``--max-concurrent-rpcs``, which streams count against too). At shutdown every
stream is ended at once with UNAVAILABLE: a client resumes on another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from gnau_service.server.grpc.statuses import ShuttingDown, TooManyStreams

T = TypeVar("T")


class StreamSlots:
    """Open streams, counted in total and per peer address."""

    def __init__(self, total: int, per_peer: int) -> None:
        self.total = total
        self.per_peer = per_peer
        self._open: Counter[str] = Counter()
        self._open_total = 0
        self._ending = asyncio.Event()

    @property
    def open(self) -> int:
        return self._open_total

    @contextlib.asynccontextmanager
    async def slot(self, peer: str) -> AsyncIterator[None]:
        """Hold a slot for ``peer`` while the block runs (TooManyStreams if none is free)."""
        if self._open[peer] >= self.per_peer:
            raise TooManyStreams(f"peer {peer}", self.per_peer)
        if self._open_total >= self.total:
            raise TooManyStreams("the server", self.total)
        self._open[peer] += 1
        self._open_total += 1
        try:
            yield
        finally:
            self._open_total -= 1
            self._open[peer] -= 1
            if not self._open[peer]:
                del self._open[peer]

    def end_all(self) -> None:
        """End every stream (now and any that starts later) with UNAVAILABLE: shutting down."""
        self._ending.set()

    async def run(self, body: Callable[[], Awaitable[T]]) -> T:
        """Run a stream's ``body`` until it ends, or until :meth:`end_all` (ShuttingDown)."""
        if self._ending.is_set():
            raise ShuttingDown()
        streaming = asyncio.ensure_future(body())
        # If this call is cancelled (the client went away) as the stream fails, nobody else
        # takes its exception, and asyncio would log it as never retrieved.
        streaming.add_done_callback(_retrieve)
        ending = asyncio.ensure_future(self._ending.wait())
        try:
            await asyncio.wait((streaming, ending), return_when=asyncio.FIRST_COMPLETED)
        finally:
            ending.cancel()
            streaming.cancel()  # ended by shutdown, or the caller was cancelled; else a no-op
        if not streaming.done():
            raise ShuttingDown()
        return streaming.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
