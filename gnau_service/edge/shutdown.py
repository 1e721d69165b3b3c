"""A graceful stop, in the order clients and load balancers need it (``docs/api.md``).

1. Health turns NOT_SERVING, and stays answerable for the notice period
   (``--shutdown-notice-seconds``).
2. New calls, but for health checks, are refused with UNAVAILABLE (``SHUTTING_DOWN``): a client
   retries on another replica.
3. Streams end with UNAVAILABLE when the notice period ends, or after
   :data:`STREAMS_END_SECONDS` if that is sooner (so a health watcher has seen NOT_SERVING).
4. Unary calls in flight finish, within the grace period (``--grace-seconds``).
5. The transport stops; the store finishes its batch and closes.
6. The process exits, within :data:`EXIT_SECONDS` of step 5 even if a worker thread is still
   blocked (on a database whose network vanished, say): everything is durable by then, and a
   stuck thread must not hold the process until the orchestrator kills it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Final

import structlog

log = structlog.get_logger("gnau.server")

#: Streams end this long after shutdown begins, at the latest.
STREAMS_END_SECONDS: Final = 1.0
#: The process exits at most this long after the store has closed (step 6).
EXIT_SECONDS: Final = 5.0


def exit_within(seconds: float = EXIT_SECONDS) -> None:
    """Make sure the process ends within ``seconds``: Python waits for every worker thread at
    exit, without a bound, so a thread blocked in a read would keep the stopped process alive.
    A daemon timer ends it then, with exit status 0 and one WARNING naming the threads left."""

    def leave() -> None:
        blocked = [t.name for t in threading.enumerate() if not t.daemon and t.is_alive()]
        log.warning(
            "exiting with threads still blocked", threads=blocked[:10], waited_seconds=seconds
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(seconds, leave)
    timer.daemon = True
    timer.start()


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
