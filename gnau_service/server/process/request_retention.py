"""How long request ids are remembered.

Each change's request record (its id, method, a fingerprint of the request, and the answer a
retry gets: docs/integration.md, *Idempotency*) is kept for ``--request-retention-days`` (90 by
default), then deleted: a retry within that time gets the original answer; a request id sent
again after it is a new request, which the round's state machine answers (a second ``Deal`` of
a dealt round is ``ROUND_STATE``, never a second deal). Nothing of the log is deleted: the
records are not part of it.

Every process prunes at start and every :data:`PRUNE_SECONDS`, in batches of
:data:`PRUNE_BATCH` (each its own short step transaction, through the store's one write path),
by the index on ``created_at`` (migration 3). Several replicas pruning at once delete each row
once: a DELETE of a row another deleted finds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Final

import structlog

from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.store import Store, StoreUnavailable, Transaction
from gnau_service.store.transaction import Work

#: The default, and the range accepted, of ``--request-retention-days``.
DEFAULT_RETENTION_DAYS: Final = 90
RETENTION_DAYS_RANGE: Final = (1, 36_500)
PRUNE_SECONDS: Final = 600.0
PRUNE_BATCH: Final = 1000

log = structlog.get_logger("gnau.requests")


def _delete_older(cutoff: str) -> Work[int]:
    def unit(tx: Transaction) -> int:
        expired = tx.execute(
            "SELECT request_id FROM requests WHERE created_at < ? ORDER BY created_at LIMIT ?",
            (cutoff, PRUNE_BATCH),
        )
        if expired:
            # A request id is an operator's own: another operator's record of the same id is
            # deleted only if it has expired too.
            marks = ", ".join("?" * len(expired))
            tx.execute(
                f"DELETE FROM requests WHERE created_at < ? AND request_id IN ({marks})",  # noqa: S608  (only ?s)
                [cutoff, *(row[0] for row in expired)],
            )
        return len(expired)

    return unit


async def prune_expired(store: Store, retention_days: int, now: datetime | None = None) -> int:
    """Delete the request records older than ``retention_days``; how many were deleted."""
    moment = datetime.now(UTC) if now is None else now
    cutoff = format_utc_timestamp(moment - timedelta(days=retention_days))
    total = 0
    while True:
        deleted = await store.run_async(_delete_older(cutoff))
        total += deleted
        if deleted < PRUNE_BATCH:
            return total


class RequestRetention:
    """Prunes expired request records at start and every :data:`PRUNE_SECONDS`."""

    def __init__(self, store: Store, retention_days: int) -> None:
        self._store = store
        self._days = retention_days
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="gnau-request-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            # An outage is reported where calls are answered; the next turn tries again.
            with contextlib.suppress(StoreUnavailable):
                deleted = await prune_expired(self._store, self._days)
                if deleted:
                    log.info("request records expired", deleted=deleted, days=self._days)
            await asyncio.sleep(PRUNE_SECONDS)
