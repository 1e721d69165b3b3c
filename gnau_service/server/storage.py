"""The store's health as the service reports it: an outage is logged once, health says
NOT_SERVING while it lasts, and a probe finds its end.

A call that cannot reach the store is answered UNAVAILABLE (``STORAGE_UNAVAILABLE``), which
clients retry with the same request id. The first such refusal opens an *episode*: its cause is
logged once (an error, with no traceback), the dealer's health turns NOT_SERVING so that load
balancers send its calls elsewhere, and a probe tries a write (one that logs nothing) every
:data:`PROBE_SECONDS` until one commits; then the end of the episode is logged, with how long it
lasted and how many calls were refused, and health turns SERVING again.
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

log = structlog.get_logger("gnau.storage")


def touch_head(tx: Transaction) -> None:
    """A write that changes nothing and logs nothing, but must reach the disk to commit. It
    touches the head row, which round steps never do (the sequencer locks it), but only while
    the store is failing, once a probe interval."""
    tx.execute("UPDATE log_head SET size = size WHERE id = 1")


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
        self._began = 0.0
        self.refused = 0

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
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe

    async def _until_writable(self) -> None:
        await self._set_serving(False)
        while True:
            await asyncio.sleep(PROBE_SECONDS)
            with contextlib.suppress(StoreUnavailable):
                await self._store.run_async(touch_head)
                break
        log.warning(
            "storage available again",
            seconds=round(time.monotonic() - self._began, 1),
            refused_calls=self.refused,
        )
        self.refused = 0
        self._probe = None
        await self._set_serving(True)
