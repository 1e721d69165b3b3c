"""Server-streaming calls: their slots, and their end when the server stops.

Every open stream holds a slot of its caller's share and of the total
(:mod:`~gnau_service.server.grpc.shares`), besides the call slot every call holds, so no client
can take every call the server allows. At shutdown every stream is ended at once with
UNAVAILABLE: a client resumes on another replica.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gnau_service.server.grpc.shares import Shares
from gnau_service.server.grpc.statuses import ShuttingDown

T = TypeVar("T")


class StreamSlots(Shares):
    """Open streams, counted per caller and in total, and ended together at shutdown."""

    def __init__(self, total: int, per_caller: int) -> None:
        super().__init__("streams", total, per_caller)
        self._ending = asyncio.Event()

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
