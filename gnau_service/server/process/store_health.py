"""The store's health as the service reports it: an outage is logged once, health says
NOT_SERVING while it lasts, and a probe finds its end.

A call that cannot reach the store is answered UNAVAILABLE (``STORAGE_UNAVAILABLE``), which
clients retry with the same request id. The first such refusal opens an *episode*: its cause is
logged once (an error, with no traceback), the dealer's health turns NOT_SERVING so that load
balancers send its calls elsewhere, and a probe tries a write (one that logs nothing) every
:data:`PROBE_SECONDS` until one commits; then the end of the episode is logged, with how long it
lasted and how many calls were refused, and health turns SERVING again.

A *stalled log* is reported the same way (PostgreSQL replicas): while the oldest committed event
of the log has waited for integration longer than the store's stall bound (no sequencer makes
progress: see :mod:`gnau_service.store.lease`), health says NOT_SERVING, its start and end are
logged once each, and the waiting calls are answered UNAVAILABLE (``LOG_STALLED``). Checked every
:data:`STALL_CHECK_SECONDS`, from what the store's sequencer last read; it queries nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from gnau_service.store import Store, StoreUnavailable, Transaction

PROBE_SECONDS: Final = 1.0
STALL_CHECK_SECONDS: Final = 0.5

log = structlog.get_logger("gnau.storage")


def probe_write(tx: Transaction) -> None:
    """A write that changes nothing and logs nothing, but must reach the disk to commit: the
    newest row of the migration history, which only a migration writes. Not the log head: a
    transaction holding the head's row holds up the log, so only the log's own work (which the
    next sequencer ends after the lease: gnau_service/store/lease.py) and migrations (which wait
    no longer than the lease) take it."""
    tx.execute(
        "UPDATE gnau_migrations SET version = version"
        " WHERE version = (SELECT max(version) FROM gnau_migrations)"
    )


class StorageHealth:
    """Episodes of an unusable store, and health to match (``set_serving(bool)``)."""

    def __init__(
        self,
        store: Store,
        set_serving: Callable[[bool], Awaitable[None]],
    ) -> None:
        self._store = store
        self._set_serving = set_serving
        self._probe: asyncio.Task[None] | None = None
        self._stall_watch: asyncio.Task[None] | None = None
        self._began = 0.0
        self.refused = 0
        #: Whether the log is stalled now (see above).
        self.stalled = False

    @property
    def serving(self) -> bool:
        return not (self.failing or self.stalled)

    def watch_stalls(self) -> None:
        """Start watching for a stalled log, where the store can stall (several processes)."""
        if self._store.stall_seconds is not None and self._stall_watch is None:
            self._stall_watch = asyncio.create_task(self._watch_stalls(), name="gnau-stall-watch")

    @property
    def failing(self) -> bool:
        return self._probe is not None

    def failed(self, error: StoreUnavailable) -> None:
        """A call could not use the store: start an episode, or count one more refusal in it."""
        self.refused += 1
        if self._probe is not None:
            return
        self._began = time.monotonic()
        log.error("storage unavailable; refusing calls with UNAVAILABLE", cause=str(error))
        self._probe = asyncio.create_task(self._until_writable(), name="gnau-storage-probe")

    async def stop(self) -> None:
        for task in (self._probe, self._stall_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch_stalls(self) -> None:
        store = self._store
        began = 0.0
        while True:
            await asyncio.sleep(STALL_CHECK_SECONDS)
            stalled = store.stalled()
            if stalled == self.stalled:
                continue
            self.stalled = stalled
            progress = store.log_progress()
            lease = (
                {}
                if progress is None
                else {
                    "lease_epoch": progress.epoch,
                    "lease_holder": progress.holder,
                    "lease_age_seconds": round(progress.lease_age, 1),
                }
            )
            if stalled:
                began = time.monotonic()
                log.error(
                    "log stalled: committed changes wait for the sequencer; refusing with"
                    " UNAVAILABLE (LOG_STALLED)",
                    waited_seconds=round(store.integration_wait(), 1),
                    bound_seconds=store.stall_seconds,
                    **lease,
                )
            else:
                log.warning(
                    "log integrating again",
                    seconds=round(time.monotonic() - began, 1),
                    **lease,
                )
            await self._set_serving(self.serving)

    async def _until_writable(self) -> None:
        await self._set_serving(self.serving)
        while True:
            await asyncio.sleep(PROBE_SECONDS)
            with contextlib.suppress(StoreUnavailable):
                await self._store.run_async(probe_write)
                break
        log.warning(
            "storage available again",
            seconds=round(time.monotonic() - self._began, 1),
            refused_calls=self.refused,
        )
        self.refused = 0
        self._probe = None
        await self._set_serving(self.serving)
