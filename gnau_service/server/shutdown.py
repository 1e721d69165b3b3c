"""A graceful stop, in the order clients and load balancers need it (``docs/api.md``).

1. Health turns NOT_SERVING, and stays answerable for the notice period
   (``--shutdown-notice-seconds``).
2. New calls, but for health checks, are refused with UNAVAILABLE (``SHUTTING_DOWN``): a client
   retries on another replica.
3. Streams end with UNAVAILABLE when the notice period ends, or after
   :data:`STREAMS_END_SECONDS` if that is sooner (so a health watcher has seen NOT_SERVING).
4. Unary calls in flight finish, within the grace period (``--grace-seconds``).
5. The transport stops; the store finishes its batch and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Final

#: Streams end this long after shutdown begins, at the latest.
STREAMS_END_SECONDS: Final = 1.0


class Shutdown:
    """Whether the service is stopping, and the unary calls still running."""

    def __init__(self) -> None:
        self.begun = False
        self._began_at = 0.0
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Count a unary call while it runs."""
        self._running += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    def begin(self) -> None:
        """Refuse new calls from now on."""
        self.begun = True
        self._began_at = time.monotonic()

    def left(self, seconds: float) -> float:
        """What is left of a period of ``seconds`` (the grace, the notice) that began with the
        shutdown; none once it is over."""
        assert self.begun
        return max(seconds - (time.monotonic() - self._began_at), 0)

    async def calls_finished(self, timeout: float) -> None:
        """Wait until the unary calls in flight have finished, or ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(timeout, 0))
