"""Waiting for the database at start: a dealer started before its PostgreSQL server is ready
(a fresh Compose stack, a pod scheduled before the database) tries again, with a growing pause,
for up to ``--database-wait-seconds``, then serves; it does not exit and rely on a restart
policy, which some orchestrators (podman-compose among them) do not pair with a health
condition.

Only a failed connection is waited out (:class:`~gnau_service.store.DatabaseUnreachable`:
nothing listens yet, the server is starting up, a connection attempt timed out). A database that
answers but is wrong (a schema too new, a migration needed, a bad key) fails the start at once.

The first failure is one WARNING, naming the database (never its password) and the error; each
later attempt is an INFO line; a success after waiting says how long it took. A SIGTERM during
the wait stops the service at the next pause (:func:`~gnau_service.server.process.app.serve`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import monotonic
from typing import Final, TypeVar

import structlog

from gnau_service.store import DatabaseUnreachable

log = structlog.get_logger("gnau.server")

#: The first pause between two attempts, and the longest (each pause is twice the last).
PAUSE_SECONDS: Final = (0.25, 5.0)
#: The default of ``--database-wait-seconds``: longer than a PostgreSQL container's first start
#: (initdb, then a restart), which takes a few seconds, with room for a slow disk.
DEFAULT_WAIT_SECONDS: Final = 60.0

Opened = TypeVar("Opened")


async def when_reachable(open_database: Callable[[], Opened], wait_seconds: float) -> Opened:
    """``open_database()``, tried again while the database is unreachable, for up to
    ``wait_seconds`` from the first attempt; then its last :class:`DatabaseUnreachable`, with
    how long it waited."""
    started = monotonic()
    pause, longest = PAUSE_SECONDS
    attempt = 1
    while True:
        try:
            opened = open_database()
        except DatabaseUnreachable as error:
            waited = monotonic() - started
            left = wait_seconds - waited
            if left <= 0:
                if attempt == 1:
                    raise
                raise DatabaseUnreachable(
                    f"{error} (tried {attempt} times in {waited:.0f} s: --database-wait-seconds)"
                ) from error
            pause = min(pause, left)
            say = log.warning if attempt == 1 else log.info
            say(
                "waiting for the database",
                error=str(error),
                attempt=attempt,
                retry_in_seconds=round(pause, 2),
                wait_seconds=wait_seconds,
            )
            await asyncio.sleep(pause)
            pause = min(2 * pause, longest)
            attempt += 1
            continue
        if attempt > 1:
            waited = round(monotonic() - started, 2)
            log.info("database reachable", attempts=attempt, waited_seconds=waited)
        return opened
