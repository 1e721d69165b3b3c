"""The service completes the rounds nobody else does, at their deadlines.

Every process runs one :class:`RoundCompletion`. Every :data:`SWEEP_SECONDS` it reads the open
rounds whose deadline has passed (:func:`~gnau_service.store.round_rows.due_rounds`, the small
``round_deadlines`` table in deadline order) and completes each with
:meth:`Dealer.complete_due <gnau_service.rounds.dealer.Dealer.complete_due>`: a round never
dealt is voided (``DEAL_DEADLINE_PASSED``), a dealt one revealed and settled, every entry naming
the actor ``service``.

Exactly one process completes a round, however many sweep at once (``--workers``, replicas of
one PostgreSQL database, a process killed half-way): the step locks the round and re-reads its
state and deadline in the transaction that completes it, so a second process finds it final (or
moved on by a step of the platform's) and does nothing; a step killed before it commits leaves
the round as it was, due, for the next sweep. Processes take the due rounds in a random order,
so those sweeping together spread over them rather than queue on the same row.

A round is therefore completed within its deadline plus the *slack*: one sweep interval, plus
the steps of the rounds that fell due before it (a sweep reads again while its batches come
back full, so a crowd of rounds due at once is worked through without waiting for the next
sweep), plus any time the log is stalled (a stalled step is committed and integrated once a
sequencer runs again). docs/integration.md, *Deadlines*, gives the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from time import monotonic
from typing import Final

import structlog

from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.refusals import DealerError
from gnau_service.rules.errors import RulesError
from gnau_service.store import StoreUnavailable
from gnau_service.store.round_rows import due_rounds
from gnau_service.store.transaction import utc_now

#: How often each process looks for due rounds.
SWEEP_SECONDS: Final = 1.0
#: The most due rounds one read takes; a sweep reads again while its reads come back full.
SWEEP_BATCH: Final = 64
#: How long one completion waits for its entries to be logged before the sweep moves on (the
#: step is committed by then; a stalled log integrates it later).
STEP_SECONDS: Final = 10.0

log = structlog.get_logger("gnau.completion")
_ORDER: Final = random.SystemRandom()


class RoundCompletion:
    """Completes due rounds every ``sweep_seconds`` until stopped."""

    def __init__(self, dealer: Dealer, *, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self._dealer = dealer
        self._sweep_seconds = sweep_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="gnau-round-completion")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sweep(self) -> int:
        """Complete the rounds due now, batch after batch while batches come back full; how
        many this process completed."""
        completed = 0
        while True:
            due = await asyncio.to_thread(due_rounds, self._dealer.store, utc_now(), SWEEP_BATCH)
            _ORDER.shuffle(due)
            batch = 0
            for round_id in due:
                batch += await self._complete(round_id)
            completed += batch
            # A full batch may have left more due rounds; one that completed nothing holds
            # only rounds that cannot be completed now (logged), which the next sweep retries.
            if len(due) < SWEEP_BATCH or batch == 0:
                return completed

    async def _complete(self, round_id: str) -> int:
        try:
            state = await self._dealer.complete_due(round_id, deadline=monotonic() + STEP_SECONDS)
        except (DealerError, RulesError) as error:
            # A round its own rules cannot settle would be a bug; it must not stop the rest.
            log.error("round cannot be completed", round_id=round_id, error=str(error))
            return 0
        if state is None:
            return 0  # another process completed it, or a step of its own moved it on
        log.info("round completed at its deadline", round_id=round_id, state=str(state))
        return 1

    async def _run(self) -> None:
        while True:
            # An outage is reported where calls are answered; the next sweep tries again.
            with contextlib.suppress(StoreUnavailable):
                await self.sweep()
            await asyncio.sleep(self._sweep_seconds)
