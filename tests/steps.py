"""Round steps from synchronous test code, through the store's one write path.

Each call runs the store's production step driver (``Store.run_async``) on an event loop of its
own, as ``asyncio.run`` does, and waits until the units' events are integrated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.store import PendingEntry, Store, Transaction
from gnau_service.store.transaction import Work

T = TypeVar("T")


def run_step(store: Store, work: Work[T]) -> T:
    """Run one unit of work and wait until its events are integrated."""
    return asyncio.run(store.run_async(work))


def run_steps(
    store: Store, works: Sequence[Work[Any]], *, return_exceptions: bool = False
) -> list[Any]:
    """Queue ``works`` at once (in one turn of the loop: one batch on SQLite) and wait for all
    of them; with ``return_exceptions``, a failed unit's answer is what it raised."""

    async def together() -> list[Any]:
        calls = [store.run_async(work) for work in works]
        return await asyncio.gather(*calls, return_exceptions=return_exceptions)

    return asyncio.run(together())


def append(
    store: Store, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
) -> PendingEntry:
    """Append one event on its own and wait until it is a durable, signed entry."""

    def unit(tx: Transaction) -> PendingEntry:
        return tx.append(kind, payload, round_id=round_id)

    return run_step(store, unit)
